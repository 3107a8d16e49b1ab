package session

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/proxy"
)

// Benchmarks of the data plane: a public client, the real edge on
// loopback, the real agent session and proxy code, a backend. direct is
// the same load straight to the backend, measured in the same run.
// Reproduce (figures in docs/benchmarks.md):
//
//	go test -run '^$' -bench Transport -benchtime 3s -count 3 ./operator/pkg/agent/session/
//
// Profiles: add -cpuprofile cpu.out -memprofile mem.out and one -bench
// name, then go tool pprof -top.

// benchConns is the number of keep-alive connections of the load, as
// wrk -c64.
const benchConns = 64

// body64 is the backend's answer: 64 bytes.
var body64 = strings.Repeat("x", 63) + "\n"

func backend(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, body64)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// httpLoad sends b.N GETs for host to addr over benchConns keep-alive
// connections and reports requests per second.
func httpLoad(b *testing.B, addr, host string) {
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	clients := make([]*http.Client, benchConns)
	for i := range clients {
		clients[i] = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}, Timeout: 10 * time.Second}
	}
	b.ResetTimer()
	start := time.Now()
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
				req.Host = host
				resp, err := c.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK || n != int64(len(body64)) {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	b.StopTimer()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d of %d requests failed", f, b.N)
	}
	b.ReportMetric(float64(b.N)/took.Seconds(), "req/s")
	for _, c := range clients {
		c.CloseIdleConnections()
	}
}

func startTunnel(b *testing.B, cfg Config, traffic Traffic) {
	t := Start(cfg, traffic, Backoff{Initial: 50 * time.Millisecond, Max: time.Second}, Hooks{Meter: nopMeter{}}, logr.Discard(), nil)
	waitConnectedB(b, t)
	b.Cleanup(t.Stop)
}

// nopMeter stands in for the agent's Prometheus meter, so the metering
// path runs as it does in the agent.
type nopMeter struct{}

func (nopMeter) Request(int, time.Duration, int64, int64) {}
func (nopMeter) Bytes(int64, int64)                       {}

// BenchmarkTransportHTTP: small GETs (64-byte answers) on 64 keep-alive
// connections. direct: to the backend; tunnel-proxy: through the edge and
// the agent's reverse proxy (an http.Server and httputil.ReverseProxy per
// channel); tunnel: through the edge and what the agent runs for a Tunnel
// with an http upstream.
func BenchmarkTransportHTTP(b *testing.B) {
	up := backend(b)
	b.Run("direct", func(b *testing.B) { httpLoad(b, up, "direct") })
	b.Run("tunnel-proxy", func(b *testing.B) {
		e, cfg := startEdge(b, "bproxy")
		u := proxy.Upstream{Scheme: "http", Addr: up, Display: "web:80"}
		startTunnel(b, cfg, Traffic{Handler: proxy.NewHTTP(u, nopMeter{})})
		httpLoad(b, e.HTTPAddr(), "bproxy.tuna.localhost")
	})
}

// echoBackend answers every byte it reads.
func echoBackend(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	b.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String()
}

// echoLoad sends b.N 64-byte messages, each awaited before the next, over
// benchConns connections to addr, and reports messages per second.
func echoLoad(b *testing.B, addr string) {
	conns := make([]net.Conn, benchConns)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		conns[i] = c
	}
	msg := []byte(body64)
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := bufio.NewReader(c)
			buf := make([]byte, len(msg))
			_ = c.SetDeadline(time.Now().Add(time.Minute))
			for next.Add(1) <= int64(b.N) {
				if _, err := c.Write(msg); err != nil {
					failed.Add(1)
					return
				}
				if _, err := io.ReadFull(r, buf); err != nil {
					failed.Add(1)
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	b.StopTimer()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d connections failed", f)
	}
	b.ReportMetric(float64(b.N)/took.Seconds(), "msg/s")
	for _, c := range conns {
		_ = c.Close()
	}
}

// BenchmarkTransportTCP: 64-byte echo round trips on 64 connections,
// direct and through a tcp tunnel.
func BenchmarkTransportTCP(b *testing.B) {
	up := echoBackend(b)
	b.Run("direct", func(b *testing.B) { echoLoad(b, up) })
	b.Run("tunnel", func(b *testing.B) {
		e, c := newEdge(b)
		if _, err := c.CreateTCPEndpoint(context.Background(), apiwire.CreateTCPEndpoint{Alias: "echo"}); err != nil {
			b.Fatal(err)
		}
		tk, err := c.CreateTunnelKey(context.Background(), apiwire.CreateTunnelKey{Protocol: "tcp", Address: "echo"})
		if err != nil {
			b.Fatal(err)
		}
		cfg := Config{Edge: tunnelclientConfig(e, tk.Key), Bind: protocol.BindRequest{Protocol: "tcp", Alias: "echo"}}
		t := Start(cfg, Traffic{TCPAddr: func() string { return up }}, Backoff{Initial: 50 * time.Millisecond, Max: time.Second},
			Hooks{Meter: nopMeter{}}, logr.Discard(), nil)
		waitConnectedB(b, t)
		b.Cleanup(t.Stop)
		echoLoad(b, strings.TrimPrefix(t.State().URL, "tcp://"))
	})
}

func tunnelclientConfig(e *server.Edge, key string) tunnelclient.Config {
	return tunnelclient.Config{Addr: e.SSHAddr(), Key: key, HostKey: e.HostKey()}
}
