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
	// FramesAuto takes them in frames, whatever the upstream: the edge
	// writes and parses no HTTP/1.1 for an h2 stream. Measured against
	// HTTP/1.1 channels to the agent's h1 relay (an http upstream), the
	// two ways cost the same within the machine's noise
	// (docs/benchmarks.md): what the edge saves, the agent's net/http
	// spends again.
	FramesAuto Frames = iota
	// FramesOn takes every stream in frames.
	FramesOn
	// FramesOff binds as agents before frames did: every stream comes
	// as HTTP/1.1 on a channel.
	FramesOff
)

// servesFrames: an http tunnel with a handler serves the framed channels
// that carry the edge's HTTP/2 streams (protocol.FeatureHTTPFrames),
// unless its Frames is FramesOff. Decided at each bind.
func (t *Tunnel) servesFrames() bool {
	if t.cfg.Bind.Protocol != protocol.ProtocolHTTP || t.traffic.Handler == nil {
		return false
	}
	return t.traffic.Frames != FramesOff
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
