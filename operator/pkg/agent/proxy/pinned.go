package proxy

import (
	"context"
	"net"
	"net/http"
	"time"

	"code.tuna.am/tuna/k8s-operator/internal/httpfwd"
)

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
// not an upgrade, on a server set up with httpfwd.Pin (the agent's server
// of tunnel channels). Otherwise r goes through httputil.ReverseProxy and
// the shared transport.
func (t *target) pinnable(r *http.Request) (*httpfwd.Idle, bool) {
	if t.up.Scheme != "http" || httpfwd.IsUpgrade(r) {
		return nil, false
	}
	return httpfwd.IdleOf(r.Context())
}
