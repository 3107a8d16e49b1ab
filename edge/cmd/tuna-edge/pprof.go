package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"code.tuna.am/tuna/k8s-operator/internal/accept"
)

// startPprof serves Go's runtime profiles (/debug/pprof/) on addr, for
// measuring where the edge spends its time under load. The profiles show
// the process's code paths and goroutines, so the listener must be a
// loopback address: anything else is refused.
func startPprof(addr string, log *slog.Logger) (func(), error) {
	if err := checkLoopback(addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof-addr: %w", err)
	}
	srv := &http.Server{Handler: profiles(), ReadHeaderTimeout: 10 * time.Second}
	al := accept.Wrap(ln, func(err error, wait time.Duration) {
		log.Warn("accepting a connection failed; retrying", "listener", "pprof", "err", err, "retry_in", wait)
	})
	go func() {
		if err := srv.Serve(al); !errors.Is(err, http.ErrServerClosed) {
			log.Error("the profiles' listener stopped", "err", err)
		}
	}()
	log.Info("serving Go profiles", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}

// checkLoopback accepts host:port whose host is a loopback IP or
// "localhost".
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--pprof-addr %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return errors.New("--pprof-addr " + addr + ": must be a loopback address such as 127.0.0.1:6060 (profiles expose the process's internals)")
}

// profiles serves /debug/pprof/profile?seconds=N (CPU) and
// /debug/pprof/<name> (heap, goroutine, allocs, ...) from runtime/pprof;
// gc=1 collects first.
// Not net/http/pprof: importing it registers the handlers on
// http.DefaultServeMux, where any server without a handler of its own
// would expose them.
func profiles() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/profile", func(w http.ResponseWriter, r *http.Request) {
		secs, err := strconv.Atoi(r.URL.Query().Get("seconds"))
		if err != nil || secs < 1 || secs > 300 {
			secs = 30
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		if err := pprof.StartCPUProfile(w); err != nil {
			http.Error(w, "a CPU profile is already running: "+err.Error(), http.StatusConflict)
			return
		}
		select {
		case <-time.After(time.Duration(secs) * time.Second):
		case <-r.Context().Done():
		}
		pprof.StopCPUProfile()
	})
	mux.HandleFunc("GET /debug/pprof/{name}", func(w http.ResponseWriter, r *http.Request) {
		p := pprof.Lookup(r.PathValue("name"))
		if p == nil {
			var names []string
			for _, p := range pprof.Profiles() {
				names = append(names, p.Name())
			}
			http.Error(w, "unknown profile; have profile (CPU), "+strings.Join(names, ", "), http.StatusNotFound)
			return
		}
		if r.URL.Query().Get("gc") == "1" {
			// As net/http/pprof's gc=1: the heap as of a collection now,
			// not of the last one, which may be long before.
			runtime.GC()
		}
		debug, _ := strconv.Atoi(r.URL.Query().Get("debug"))
		if debug == 0 {
			w.Header().Set("Content-Type", "application/octet-stream")
		}
		_ = p.WriteTo(w, debug)
	})
	return mux
}
