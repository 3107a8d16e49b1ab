package proxy

import (
	"io"
	"net"
	"sync"
	"time"
)

// PipeTCP dials addr and copies bytes both ways between conn and the
// upstream until both directions end. A failed dial closes conn at once, so
// the public client sees the connection drop rather than hang. meter may be
// nil.
func PipeTCP(conn net.Conn, addr string, meter Meter) error {
	// Closing ends the public connection; its error says nothing the
	// copy's own errors did not.
	defer func() { _ = conn.Close() }()
	up, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return err
	}
	defer func() { _ = up.Close() }()
	var wg sync.WaitGroup
	var in, out int64
	wg.Add(2)
	go func() { defer wg.Done(); in = copyAndCloseWrite(up, conn) }()
	go func() { defer wg.Done(); out = copyAndCloseWrite(conn, up) }()
	wg.Wait()
	if meter != nil {
		meter.Bytes(in, out)
	}
	return nil
}

// copyAndCloseWrite copies src to dst and then half-closes dst, so that a
// client's EOF reaches the server while the server's answer still flows.
func copyAndCloseWrite(dst, src net.Conn) int64 {
	n, _ := io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		_ = dst.Close()
	}
	return n
}
