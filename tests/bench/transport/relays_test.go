package main

import (
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
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

// The pinned forwarder's two hops carry requests to the backend and back,
// several on one keep-alive connection.
func TestHTTPForwarderHopsChain(t *testing.T) {
	addrs, err := takeAddrs(3)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = httpBackend(addrs[2]) }()
	go func() { _ = httpFwd2(addrs[0], addrs[1], addrs[2]) }()
	deadline := time.Now().Add(10 * time.Second)
	for _, a := range addrs {
		for {
			c, err := net.Dial("tcp", a)
			if err == nil {
				_ = c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never listened: %v", a, err)
			}
			runtime.Gosched()
		}
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range 3 {
		resp, err := client.Get("http://" + addrs[0] + "/")
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		got, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || string(got) != string(body) {
			t.Fatalf("request %d: %d %q, %v; want the backend's 64 bytes", i, resp.StatusCode, got, err)
		}
	}
}
