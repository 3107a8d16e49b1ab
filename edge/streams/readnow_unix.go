//go:build unix

package streams

import (
	"io"
	"os"
	"syscall"
)

// readNow reads what the kernel holds for raw into b in one system call,
// without waiting: 0 and no error when nothing is there.
func readNow(raw syscall.RawConn, b []byte) (int, error) {
	var n int
	var err error
	cerr := raw.Read(func(fd uintptr) bool {
		n, err = syscall.Read(int(fd), b)
		return true // never wait for readiness: this is the non-blocking try
	})
	switch {
	case cerr != nil:
		return 0, cerr
	case err == syscall.EAGAIN || err == syscall.EINTR:
		return 0, nil
	case err != nil:
		return 0, &os.SyscallError{Syscall: "read", Err: err}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}
