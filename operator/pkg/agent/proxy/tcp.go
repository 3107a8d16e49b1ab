package proxy

import (
	"io"
	"net"
	"sync"
	"time"
)

// PipeTCP dials addr and copies bytes both ways between conn and the
// upstream until both directions end. A failed dial closes conn at once, so
// the public client sees the connection drop rather than hang.
func PipeTCP(conn net.Conn, addr string) error {
	defer conn.Close()
	up, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return err
	}
	defer up.Close()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); copyAndCloseWrite(up, conn) }()
	go func() { defer wg.Done(); copyAndCloseWrite(conn, up) }()
	wg.Wait()
	return nil
}

// copyAndCloseWrite copies src to dst and then half-closes dst, so that a
// client's EOF reaches the server while the server's answer still flows.
func copyAndCloseWrite(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		_ = dst.Close()
	}
}
