package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"code.tuna.am/tuna/k8s-operator/internal/httpfwd"
)

// The benchmark binary doubles as the backends and the reference proxies:
// `transport <role> <addrs...>` runs one of them as a process of its own,
// so neither shares a Go runtime with the load generator or the edge.
var roles = map[string]func(args []string) error{
	// http-backend LISTEN: answers every request with 64 bytes.
	"http-backend": func(a []string) error { return need(a, 1, func() error { return httpBackend(a[0]) }) },
	// https-backend LISTEN CERT KEY: the same answer over TLS, h1 and h2.
	"https-backend": func(a []string) error { return need(a, 3, func() error { return httpsBackend(a[0], a[1], a[2]) }) },
	// tls-conns ADDR HOST CAFILE SECONDS full|resumed: new connections.
	"tls-conns": func(a []string) error { return need(a, 5, func() error { return tlsConns(a) }) },
	// ws-echo LISTEN: a WebSocket echo server; ws-client ADDR HOST SECONDS.
	"ws-echo":   func(a []string) error { return need(a, 1, func() error { return wsEcho(a[0]) }) },
	"ws-client": func(a []string) error { return need(a, 3, func() error { return wsClient(a) }) },
	// grpc-backend LISTEN: gRPC over h2c; grpc-client ADDR AUTHORITY CAFILE|- SECONDS.
	"grpc-backend": func(a []string) error { return need(a, 1, func() error { return grpcBackend(a[0]) }) },
	"grpc-client":  func(a []string) error { return need(a, 4, func() error { return grpcClient(a) }) },
	// echo LISTEN: a TCP echo server.
	"echo": func(a []string) error { return need(a, 1, func() error { return echoServer(a[0]) }) },
	// http-relay2 HOP1 HOP2 TO: two chained httputil.ReverseProxy hops.
	"http-relay2": func(a []string) error { return need(a, 3, func() error { return httpRelay2(a[0], a[1], a[2]) }) },
	// http-fwd2 HOP1 HOP2 TO: two chained hops of the forwarder that the
	// edge and the agent use (internal/httpfwd).
	"http-fwd2": func(a []string) error { return need(a, 3, func() error { return httpFwd2(a[0], a[1], a[2]) }) },
	// tcp-relay2 HOP1 HOP2 TO: two chained io.Copy relays.
	"tcp-relay2": func(a []string) error { return need(a, 3, func() error { return tcpRelay2(a[0], a[1], a[2]) }) },
	// tcp-relay LISTEN TO: one io.Copy relay; two of them chained are two
	// hops in processes of their own, as the edge and the agent are.
	"tcp-relay": func(a []string) error {
		return need(a, 2, func() error { return serveTCP(a[0], func(c net.Conn) { relay(c, a[1]) }) })
	},
}

func need(args []string, n int, fn func() error) error {
	if len(args) != n {
		return fmt.Errorf("want %d addresses, got %q", n, args)
	}
	return fn()
}

// body is the 64-byte answer of the HTTP backend.
var body = []byte(strings.Repeat("x", 63) + "\n")

func httpBackend(addr string) error {
	srv := &http.Server{Addr: addr, ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write(body)
		})}
	return srv.ListenAndServe()
}

func echoServer(addr string) error {
	return serveTCP(addr, func(c net.Conn) {
		defer func() { _ = c.Close() }()
		_, _ = io.Copy(c, c)
	})
}

// httpRelay2 chains two reverse proxies: HOP1 -> HOP2 -> TO. Their
// transport keeps as many idle connections per host as the agent's does
// (64); the default 2 would make the reference dial on most requests.
func httpRelay2(hop1, hop2, to string) error {
	mk := func(next string) http.Handler {
		u := &url.URL{Scheme: "http", Host: next}
		p := httputil.NewSingleHostReverseProxy(u)
		p.Transport = &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}
		return p
	}
	errc := make(chan error, 2)
	for _, h := range []struct{ listen, next string }{{hop1, hop2}, {hop2, to}} {
		srv := &http.Server{Addr: h.listen, Handler: mk(h.next), ReadHeaderTimeout: 10 * time.Second}
		go func() { errc <- srv.ListenAndServe() }()
	}
	return <-errc
}

// httpFwd2 chains two plain forwarders, each with a connection to the
// next hop pinned to every inbound connection, as the edge and the agent
// forward plain requests; no SSH, no encryption.
func httpFwd2(hop1, hop2, to string) error {
	errc := make(chan error, 2)
	for _, h := range []struct{ listen, next string }{{hop1, hop2}, {hop2, to}} {
		dial := func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", h.next)
		}
		srv := &http.Server{Addr: h.listen, ReadHeaderTimeout: 10 * time.Second,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				idle, _ := httpfwd.IdleOf(r.Context())
				if err := httpfwd.Forward(w, httpfwd.Outgoing(r), idle, h.next, dial, nil); err != nil {
					http.Error(w, err.Error(), http.StatusBadGateway)
				}
			})}
		httpfwd.Pin(srv)
		go func() { errc <- srv.ListenAndServe() }()
	}
	return <-errc
}

// tcpRelay2 chains two byte relays: HOP1 -> HOP2 -> TO, each io.Copy in
// both directions (splice(2) between TCP sockets on Linux).
func tcpRelay2(hop1, hop2, to string) error {
	errc := make(chan error, 2)
	for _, h := range []struct{ listen, next string }{{hop1, hop2}, {hop2, to}} {
		go func() {
			errc <- serveTCP(h.listen, func(c net.Conn) { relay(c, h.next) })
		}()
	}
	return <-errc
}

func relay(c net.Conn, next string) {
	defer func() { _ = c.Close() }()
	up, err := net.Dial("tcp", next)
	if err != nil {
		return
	}
	defer func() { _ = up.Close() }()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, c)
		_ = up.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	_, _ = io.Copy(c, up)
	_ = c.(*net.TCPConn).CloseWrite()
	<-done
}

func serveTCP(addr string, handle func(net.Conn)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return acceptLoop(ln, handle)
}

// acceptLoop hands each connection of ln to handle until ln is closed.
func acceptLoop(ln net.Listener, handle func(net.Conn)) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go handle(c)
	}
}
