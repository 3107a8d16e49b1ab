package public

import (
	"context"
	"net"
	"net/http"
	"sync"

	"code.tuna.am/tuna/k8s-operator/edge/internal/registry"
	"code.tuna.am/tuna/k8s-operator/edge/metrics"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/internal/httprule"
	"code.tuna.am/tuna/k8s-operator/internal/streamframe"
)

// forwardFramed sends an HTTP/2 stream on a channel in frames
// (internal/streamframe): no HTTP/1.1 is written or parsed on the way.
// Each channel carries one stream at a time and is kept for the
// connection's next streams. A channel opened on a session whose agent
// does not serve frames (an older agent) carries the stream as HTTP/1.1,
// as every stream went before (forward).
func (h *Handler) forwardFramed(w http.ResponseWriter, r *http.Request, cs *connState, rt *registry.Route) {
	host := routeKey(cs, r.Host)
	out := h.outgoing(w, r, cs)
	for sends := 1; ; sends++ {
		fc := cs.frames.take(host)
		if fc == nil {
			if cs.noFrames.Load() {
				h.forwardOn(w, r, out, cs, rt, nil)
				return
			}
			c, err := h.open(r.Context(), rt, protocol.ForwardInfo{RemoteAddr: cs.remote, Host: host, Scheme: cs.scheme, Framed: true})
			if err != nil {
				h.proxyError(w, r, err)
				return
			}
			if f, ok := c.(interface{ Framed() bool }); !ok || !f.Framed() {
				// The rest of the connection's streams go so too, on the
				// channels it keeps for them.
				cs.noFrames.Store(true)
				h.forwardOn(w, r, out, cs, rt, metrics.TunnelConn{Conn: c, M: h.m})
				return
			}
			fc = streamframe.NewConn(metrics.TunnelConn{Conn: c, M: h.m})
		}
		reusable, err := streamframe.Forward(w, out, fc)
		switch {
		case err == nil && reusable:
			cs.frames.put(host, fc)
			return
		case err == nil:
			_ = fc.Close()
			return
		}
		_ = fc.Close()
		// A kept channel found closed before any of the request
		// reached it: sent again on another (httprule.Replay).
		if !streamframe.NotSent(err) || sends >= httprule.MaxSends || r.Context().Err() != nil {
			h.proxyError(w, r, err)
			return
		}
	}
}

// open opens a channel on the pool's pick for one public request; an
// agent that stops accepting must not hold the client forever.
func (h *Handler) open(ctx context.Context, rt *registry.Route, info protocol.ForwardInfo) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	return rt.Pool.Open(ctx, info)
}

// framedIdle is one HTTP/2 connection's idle framed channels, each kept
// for the host it was opened for.
type framedIdle struct {
	mu     sync.Mutex
	conns  []framedConn
	closed bool
}

type framedConn struct {
	host string
	c    *streamframe.Conn
}

// take returns an idle channel for host that its session has not taken
// back (a drain closes idle channels: httprule.Lease), or nil.
func (p *framedIdle) take(host string) *streamframe.Conn {
	for {
		p.mu.Lock()
		var fc *streamframe.Conn
		for i := len(p.conns) - 1; i >= 0; i-- {
			if p.conns[i].host == host {
				fc = p.conns[i].c
				p.conns = append(p.conns[:i], p.conns[i+1:]...)
				break
			}
		}
		p.mu.Unlock()
		if fc == nil {
			return nil
		}
		if l := fc.Lease(); l == nil || l.Acquire() {
			return fc
		}
		_ = fc.Close()
	}
}

// put keeps fc idle, or closes it when the connection is gone or keeps
// as many as its streams commonly run at once (h2IdleChannels).
func (p *framedIdle) put(host string, fc *streamframe.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.conns) >= h2IdleChannels {
		_ = fc.Close()
		return
	}
	// Idle before another stream can take it: take acquires it again.
	if l := fc.Lease(); l != nil {
		l.Release()
	}
	p.conns = append(p.conns, framedConn{host: host, c: fc})
}

// close closes the idle channels; later ones are closed as they are put.
func (p *framedIdle) close() {
	p.mu.Lock()
	conns := p.conns
	p.conns, p.closed = nil, true
	p.mu.Unlock()
	for _, fc := range conns {
		_ = fc.c.Close()
	}
}
