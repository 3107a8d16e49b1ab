package public

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"golang.org/x/crypto/acme"

	"code.tuna.am/tuna/k8s-operator/edge/internal/access"
	"code.tuna.am/tuna/k8s-operator/edge/internal/h2serve"
	"code.tuna.am/tuna/k8s-operator/edge/internal/names"
	"code.tuna.am/tuna/k8s-operator/edge/metrics"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/internal/h1"
	"code.tuna.am/tuna/k8s-operator/internal/httprule"
)

// Relay returns the public HTTP listener's server: plain HTTP/1.1
// requests for a bound host go through the h1 relay, each head parsed
// once and the rest piped; fallback (Server("http")) keeps everything
// else, from the connection's first request that is not the relay's on:
// upgrades, HTTP/1.0, unusual framing, ACME challenges, and every answer
// the edge gives itself (no tunnel, not connected, refused address,
// over a limit).
func (h *Handler) Relay(fallback *http.Server) *h1.Server {
	return h.relay(fallback, "http")
}

// relay is Relay for requests that arrived over scheme: what the edge
// tells the backend in X-Forwarded-Proto and the agent in ForwardInfo.
func (h *Handler) relay(fallback *http.Server, scheme string) *h1.Server {
	return &h1.Server{Router: relayRouter{h: h, scheme: scheme, proto: []byte(scheme)}, Fallback: fallback, ReadHeaderTimeout: h.t.ReadHeader, IdleTimeout: h.t.Idle,
		BodyTimeout: h.t.Body, ExchangeTimeout: h.t.Exchange}
}

type relayRouter struct {
	h      *Handler
	scheme string
	proto  []byte // scheme, as written into every request
}

var acmeChallenge = []byte("/.well-known/acme-challenge/")

// edgeFields are dropped from what a client sends: the edge writes its
// own forwarding and identity fields, so that a client can spoof neither
// its address nor who it is (httprule.EdgeWritten).
var edgeFields = httprule.EdgeFields()

var (
	xForwardedFor   = []byte(httprule.ForwardedFor)
	xForwardedHost  = []byte(httprule.ForwardedHost)
	xForwardedProto = []byte(httprule.ForwardedProto)
)

// Route takes a request for a host with a live session, from an allowed
// address, within the host's limit of requests in flight; it counts and
// forwards it as serve does.
func (r relayRouter) Route(hd *h1.Head, remote string) (h1.Route, bool) {
	h := r.h
	if bytes.HasPrefix(hd.Target, acmeChallenge) {
		return h1.Route{}, false
	}
	host := names.Normalize(string(hd.Host))
	rt, _ := h.route(host)
	if rt == nil || !rt.Pool.ACL().AllowedAddr(remote) {
		return h1.Route{}, false
	}
	var edits access.Edits
	policy := rt.Pool.AccessPolicy()
	if policy != "" {
		var ok bool
		if edits, ok = h.access.Relay(policy, host, hd, remote, r.scheme == "https"); !ok {
			return h1.Route{}, false
		}
	}
	if !rt.Pool.Conns.Take(h.maxConns) {
		return h1.Route{}, false
	}
	h.m.PublicConnection(protocol.ProtocolHTTP)
	h.m.InFlight(1)
	ip, _, err := net.SplitHostPort(remote)
	if err != nil {
		ip = remote
	}
	route := h1.Route{
		Key: host,
		Dial: func(ctx context.Context) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, openTimeout)
			defer cancel()
			c, err := rt.Pool.Open(ctx, protocol.ForwardInfo{RemoteAddr: remote, Host: host, Scheme: r.scheme})
			if err != nil {
				return nil, err
			}
			return metrics.TunnelConn{Conn: c, M: h.m}, nil
		},
		Set: []h1.Field{
			{Name: xForwardedFor, Value: []byte(ip)},
			{Name: xForwardedHost, Value: bytes.Clone(hd.Host)},
			{Name: xForwardedProto, Value: r.proto},
		},
		Drop: edgeFields,
		Fail: func(err error) h1.Answer {
			h.log.Debug("relaying through tunnel failed", "err", err)
			code, msg, retry := failure(err)
			if retry {
				return h1.TextAnswer(code, msg, h1.Field{Name: []byte("Retry-After"), Value: []byte("1")})
			}
			return h1.TextAnswer(code, msg)
		},
		Done: func(status int, _, _ int64, _ time.Duration) {
			rt.Pool.Conns.Put()
			h.m.InFlight(-1)
			h.m.HTTPRequest(status)
		},
	}
	if policy != "" {
		edits.Apply(&route)
	}
	return route, true
}

// TLSRelay returns the public HTTPS listener's server: behind TLS, the h1
// relay for connections that negotiate http/1.1 (or no ALPN), through the
// same rulebook as plain HTTP; for those that negotiate h2, h2 (the edge's
// own HTTP/2 server, H2) or, when h2 is nil, fallback (Server("https"))
// with net/http's HTTP/2; fallback also serves what the relay hands over;
// ACME's TLS-ALPN challenge answered by the handshake alone.
func (h *Handler) TLSRelay(fallback *http.Server, cfg *tls.Config, h2 *h2serve.Server) *h1.Server {
	cfg = cfg.Clone()
	if len(cfg.NextProtos) == 0 {
		cfg.NextProtos = []string{"h2", "http/1.1"}
	}
	// Naming h2 in the fallback's TLSConfig is what makes net/http serve
	// the h2 connections it is handed with HTTP/2.
	fallback.TLSConfig = cfg
	s := h.relay(fallback, "https")
	s.TLS = cfg
	s.NextProto = map[string]func(*tls.Conn){
		acme.ALPNProto: func(c *tls.Conn) { _ = c.Close() },
	}
	if h2 != nil {
		s.NextProto["h2"] = func(c *tls.Conn) { h2.ServeConn(c) }
	}
	return s
}

// H2 returns the edge's own HTTP/2 server (package h2serve) for the h2
// connections of a listener of scheme: each stream goes through this
// handler, as net/http's HTTP/2 server hands it, with the same per
// connection state (kept framed channels, the client's address).
func (h *Handler) H2(scheme string) *h2serve.Server {
	return &h2serve.Server{
		Handler: h,
		ConnContext: func(ctx context.Context, c net.Conn) (context.Context, func()) {
			cs := &connState{remote: c.RemoteAddr().String(), scheme: scheme}
			return context.WithValue(ctx, keyConn, cs), cs.closeIdle
		},
		ReadHeaderTimeout: h.t.ReadHeader,
		IdleTimeout:       h.t.Idle,
		WriteTimeout:      h.t.Write,
		StallTimeout:      h.t.Body,
		Log:               h.log,
	}
}
