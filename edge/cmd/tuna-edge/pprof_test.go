package main

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

func TestPprofLoopbackOnly(t *testing.T) {
	for _, bad := range []string{"0.0.0.0:6060", ":6060", "10.0.0.1:6060", "example.com:6060", "no-port"} {
		if stop, err := startPprof(bad, slog.New(slog.DiscardHandler)); err == nil {
			stop()
			t.Errorf("--pprof-addr %s accepted", bad)
		}
	}
	addr := ports.Addr(t)
	stop, err := startPprof(addr, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile:") {
		t.Fatalf("GET /debug/pprof/goroutine: %d %q", resp.StatusCode, body)
	}
	// The profiles stay off the default mux, which other listeners of a
	// process may serve.
	if h, pattern := http.DefaultServeMux.Handler(&http.Request{Method: http.MethodGet, URL: resp.Request.URL}); pattern != "" {
		t.Fatalf("http.DefaultServeMux serves %s with %T", pattern, h)
	}
}
