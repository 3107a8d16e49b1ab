package main

import (
	"io"
	"net"
	"strings"
	"testing"
)

// Two relay hops, each with its own listener as the reference with a
// process per hop has, carry bytes both ways and pass the client's
// half-close on to the echo server.
func TestRelayHopsChain(t *testing.T) {
	if err := roles["tcp-relay"]([]string{"127.0.0.1:1"}); err == nil || !strings.Contains(err.Error(), "want 2 addresses") {
		t.Fatalf("tcp-relay with one address: %v", err)
	}
	listen := func(handle func(net.Conn)) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ln.Close() })
		go func() { _ = acceptLoop(ln, handle) }()
		return ln.Addr().String()
	}
	echo := listen(func(c net.Conn) {
		defer func() { _ = c.Close() }()
		_, _ = io.Copy(c, c)
	})
	hop2 := listen(func(c net.Conn) { relay(c, echo) })
	hop1 := listen(func(c net.Conn) { relay(c, hop2) })
	c, err := net.Dial("tcp", hop1)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	want := strings.Repeat("through two hops ", 4096)
	go func() {
		_, _ = io.WriteString(c, want)
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != want {
		t.Fatalf("read %d bytes, want %d: %v", len(got), len(want), err)
	}
}
