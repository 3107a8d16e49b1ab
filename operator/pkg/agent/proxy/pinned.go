package proxy

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"code.tuna.am/tuna/k8s-operator/internal/httpfwd"
)

type idleKey struct{}

// PinUpstreams makes srv keep, for each tunnel channel it serves, the
// upstream connections that the channel's plain requests to http
// upstreams use (internal/httpfwd), and close them with the channel. A
// request served without this (no idle set in its context) goes through
// httputil.ReverseProxy and the shared transport.
func PinUpstreams(srv *http.Server) {
	var mu sync.Mutex
	sets := map[net.Conn]*httpfwd.Idle{}
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		idle := &httpfwd.Idle{}
		mu.Lock()
		sets[c] = idle
		mu.Unlock()
		return context.WithValue(ctx, idleKey{}, idle)
	}
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		if st != http.StateClosed && st != http.StateHijacked {
			return
		}
		mu.Lock()
		idle := sets[c]
		delete(sets, c)
		mu.Unlock()
		if idle != nil {
			idle.Close()
		}
	}
}

var upstreamDialer = &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}

// forward sends a plain request to an http upstream on a connection
// pinned to the tunnel channel it came on. Host and the X-Forwarded-*
// headers, which the edge set, carry over unchanged.
func (t *target) forward(w http.ResponseWriter, r *http.Request, idle *httpfwd.Idle) {
	addr := t.up.Addr
	dial := func(ctx context.Context) (net.Conn, error) { return upstreamDialer.DialContext(ctx, "tcp", addr) }
	if err := httpfwd.Forward(w, httpfwd.Outgoing(r), idle, addr, dial, trailersChunked); err != nil {
		t.fail(w, r, err)
	}
}

// pinnable reports whether r can take the pinned path: an http upstream,
// not an upgrade, on a server set up with PinUpstreams.
func (t *target) pinnable(r *http.Request) (*httpfwd.Idle, bool) {
	if t.up.Scheme != "http" || httpfwd.IsUpgrade(r) {
		return nil, false
	}
	idle, ok := r.Context().Value(idleKey{}).(*httpfwd.Idle)
	return idle, ok
}
