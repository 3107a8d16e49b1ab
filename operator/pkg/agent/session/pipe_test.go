package session

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"

	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// An http tunnel without a Handler pipes its channels to TCPAddr: the
// upstream gets the request as the edge wrote it, and a refused upstream is
// answered by the edge, since the agent answers nothing of its own.
func TestHTTPTunnelWithoutHandlerPipesChannels(t *testing.T) {
	e, cfg := startEdge(t, "piped")
	host := "piped.tuna.localhost"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan http.Header, 10)
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		_, _ = io.WriteString(w, "from upstream "+r.Host)
	})}
	go func() { _ = up.Serve(ln) }()
	t.Cleanup(func() { _ = up.Close() })

	addr := ln.Addr().String()
	refused := ports.Addr(t) // nothing listens there
	var target atomic.Pointer[string]
	target.Store(&addr)
	a := Start(cfg, Traffic{TCPAddr: func() string { return *target.Load() }}, DefaultBackoff, Hooks{}, logr.Discard(), nil)
	defer a.Stop()
	waitConnected(t, a)

	code, body := fetch(t, e.HTTPAddr(), host)
	if code != http.StatusOK || body != "from upstream "+host {
		t.Fatalf("through the piped tunnel: %d %q", code, body)
	}
	if h := <-seen; h.Get("X-Forwarded-Host") != host {
		t.Fatalf("the edge's forwarded headers did not reach the upstream: %v", h)
	}

	target.Store(&refused)
	code, body = fetch(t, e.HTTPAddr(), host)
	if code != http.StatusBadGateway || !strings.HasPrefix(body, "tuna-edge: the tunnel did not answer") {
		t.Fatalf("with the upstream refused: %d %q, want the edge's 502", code, body)
	}
}
