package sshd

import (
	"net"
	"testing"
	"time"
)

// A stream on the edge reads its socket without waiting (streams'
// draining) only through peekedConn.SyscallConn, and only once the peeked
// byte is consumed: before that, the socket would skip it.
func TestPeekedConnGivesItsSocketAfterThePeekedByte(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			_, _ = c.Write([]byte{0x16, 'x'})
			defer c.Close()
			var b [1]byte
			_, _ = c.Read(b[:]) // until the test closes its end
		}
	}()
	raw, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	c, isStream := peekStream(raw, time.Now().Add(5*time.Second))
	if !isStream {
		t.Fatal("0x16 first: want a stream")
	}
	pc := c.(*peekedConn)
	if _, err := pc.SyscallConn(); err == nil {
		t.Fatal("SyscallConn before the peeked byte was read: want an error")
	}
	var b [1]byte
	if n, err := pc.Read(b[:]); n != 1 || err != nil || b[0] != 0x16 {
		t.Fatalf("first read %d %v %x, want the peeked 0x16", n, err, b[0])
	}
	if _, err := pc.SyscallConn(); err != nil {
		t.Fatalf("SyscallConn after the peeked byte: %v", err)
	}
}
