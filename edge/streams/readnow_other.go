//go:build !unix

package streams

import "syscall"

// readNow has no non-blocking read here: a drain ends at once, and each
// record is written on its own, as without draining.
func readNow(syscall.RawConn, []byte) (int, error) { return 0, nil }
