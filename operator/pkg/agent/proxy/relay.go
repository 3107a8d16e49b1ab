package proxy

import (
	"context"
	"net"
	"net/http"
	"time"

	"code.tuna.am/tuna/k8s-operator/internal/h1"
)

// Route lets the h1 relay forward a plain request that came over the
// tunnel straight to an http upstream, on a connection pinned to the
// tunnel channel, with its head parsed once and its body piped. Host and
// the X-Forwarded-* fields, which the edge set, carry over unchanged.
// Other upstreams (https, h2c) and upgrades stay with the handler.
func (h *HTTP) Route(_ *h1.Head, _ string) (h1.Route, bool) {
	t := h.current.Load()
	if t.up.Scheme != "http" {
		return h1.Route{}, false
	}
	return t.relay, true
}

// Relays reports whether the h1 relay serves plain requests now: the
// upstream is http (see Route).
func (h *HTTP) Relays() bool { return h.current.Load().up.Scheme == "http" }

// route is the relay's route to t's upstream; meter, if set, counts
// each exchange as the handler's metering does.
func (t *target) route(meter Meter) h1.Route {
	addr := t.up.Addr
	rt := h1.Route{
		Key:  addr,
		Dial: func(ctx context.Context) (net.Conn, error) { return upstreamDialer.DialContext(ctx, "tcp", addr) },
		Fail: func(err error) h1.Answer {
			code, msg := t.failure(err)
			return h1.Answer{Status: http.StatusBadGateway, Body: msg, Header: []h1.Field{
				{Name: []byte("Content-Type"), Value: []byte("text/plain; charset=utf-8")},
				{Name: []byte("X-Tuna-Error"), Value: []byte(code)},
			}}
		},
	}
	if meter != nil {
		rt.Done = func(status int, in, out int64, took time.Duration) { meter.Request(status, took, in, out) }
	}
	return rt
}
