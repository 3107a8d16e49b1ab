package main

import (
	"io"
	"log/slog"
	"net/http"
	"strconv"
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

// TestPprofHeapAfterCollection: gc=1 collects before the heap profile,
// whose allocations otherwise date from the last collection.
func TestPprofHeapAfterCollection(t *testing.T) {
	addr := ports.Addr(t)
	stop, err := startPprof(addr, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	collections := func(query string) int {
		t.Helper()
		resp, err := http.Get("http://" + addr + "/debug/pprof/heap?debug=1" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		_, after, ok := strings.Cut(string(body), "\n# NumGC = ")
		n, err := strconv.Atoi(strings.Fields(after + " x")[0])
		if resp.StatusCode != http.StatusOK || !ok || err != nil {
			t.Fatalf("GET /debug/pprof/heap%s: %d, no NumGC in %q", query, resp.StatusCode, body)
		}
		return n
	}
	before := collections("")
	if after := collections("&gc=1"); after <= before {
		t.Fatalf("gc=1: the runtime counted %d collections before and %d after", before, after)
	}
}
