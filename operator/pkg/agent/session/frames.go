package session

import (
	"context"
	"net"
	"slices"

	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	"code.tuna.am/tuna/k8s-operator/internal/httpfwd"
	"code.tuna.am/tuna/k8s-operator/internal/streamframe"
)

// Frames chooses how an http tunnel takes the edge's HTTP/2 streams.
type Frames int

const (
	// FramesAuto takes them in frames unless the h1 relay serves the
	// tunnel's plain requests (an http upstream). Frames save the edge an
	// HTTP/1.1 write and parse, and feed the agent's net/http handler,
	// which costs more than the relay; where net/http serves the stream
	// anyway (h2c and https upstreams, Ingress hosts) they only save.
	// Measured on a loaded machine, neither way won clearly
	// (docs/benchmarks.md).
	FramesAuto Frames = iota
	// FramesOn takes every stream in frames.
	FramesOn
	// FramesOff binds as agents before frames did: every stream comes
	// as HTTP/1.1 on a channel.
	FramesOff
)

// relayer is a handler whose plain requests the h1 relay serves now
// (proxy.HTTP with an http upstream).
type relayer interface{ Relays() bool }

// servesFrames: an http tunnel with a handler serves the framed channels
// that carry the edge's HTTP/2 streams (protocol.FeatureHTTPFrames), as
// its Frames says. Decided at each bind: an upstream swapped to another
// scheme while the session lives keeps the session's choice (both carry
// every stream; only their cost differs).
func (t *Tunnel) servesFrames() bool {
	if t.cfg.Bind.Protocol != protocol.ProtocolHTTP || t.traffic.Handler == nil {
		return false
	}
	switch t.traffic.Frames {
	case FramesOn:
		return true
	case FramesOff:
		return false
	}
	r, ok := t.traffic.Handler.(relayer)
	return !ok || t.traffic.NoRelay || !r.Relays()
}

// bindRequest is the tunnel's bind, with the features the agent serves.
func (t *Tunnel) bindRequest() protocol.BindRequest {
	req := t.cfg.Bind
	if t.servesFrames() && !slices.Contains(req.Features, protocol.FeatureHTTPFrames) {
		req.Features = append(slices.Clone(req.Features), protocol.FeatureHTTPFrames)
	}
	return req
}

// framedListener serves the framed channels ln accepts itself, each
// with the tunnel's handler (streamframe.Serve), and passes the others
// on to the session's HTTP server.
func (t *Tunnel) framedListener(ln net.Listener) net.Listener {
	if !t.servesFrames() {
		return ln
	}
	return framed{Listener: ln, t: t}
}

type framed struct {
	net.Listener
	t *Tunnel
}

func (f framed) Accept() (net.Conn, error) {
	for {
		c, err := f.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc, ok := c.(*tunnelclient.Conn); ok && tc.Info().Framed {
			go f.t.serveFramed(c)
			continue
		}
		return c, nil
	}
}

// serveFramed serves one framed channel until the edge closes it. Its
// plain requests to an http upstream keep an upstream connection pinned
// to the channel, as those on a channel of HTTP/1.1 do (httpfwd.Pin).
// The requests' contexts end when the channel does, not with the
// session's: a drain lets them finish.
func (t *Tunnel) serveFramed(c net.Conn) {
	idle := &httpfwd.Idle{}
	defer idle.Close()
	streamframe.Serve(context.Background(), c, t.traffic.Handler, func(ctx context.Context) context.Context {
		return httpfwd.WithIdle(ctx, idle)
	})
}
