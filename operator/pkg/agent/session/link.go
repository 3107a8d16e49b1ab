package session

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	"code.tuna.am/tuna/k8s-operator/internal/accept"
	"code.tuna.am/tuna/k8s-operator/internal/h1"
	"code.tuna.am/tuna/k8s-operator/internal/httpfwd"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/proxy"
)

// link is the tunnel's session to one edge node, reconnecting with its own
// backoff.
type link struct {
	addr string
	// id is the node run it serves, once a node list named it ("" for the
	// given address before any list).
	id     string
	ctx    context.Context
	cancel context.CancelFunc
	log    logr.Logger
	// state is guarded by the tunnel's mu.
	state State
	// retire, set when the node left the list, is how long the session may
	// finish its connections before it closes.
	retire atomic.Int64
}

// startLink runs a link to addr; t.mu is held.
func (t *Tunnel) startLink(addr, id string) {
	if t.stopped {
		return
	}
	ctx, cancel := context.WithCancel(t.ctx)
	l := &link{addr: addr, id: id, ctx: ctx, cancel: cancel, state: connecting(), log: t.log}
	if addr != t.cfg.Edge.Addr {
		l.log = t.log.WithValues("edgeNode", addr)
		t.log.Info("holding a session to another edge node", "edgeNode", addr, "node", id)
	}
	t.byAddr[addr] = l
	t.links.Add(1)
	go t.run(l)
}

func (t *Tunnel) run(l *link) {
	defer t.links.Done()
	delay := t.backoff.Initial
	for attempt := 0; ; attempt++ {
		if t.hooks.Attempt != nil {
			t.hooks.Attempt(attempt > 0)
		}
		connectedFor, err := t.once(l)
		if l.ctx.Err() != nil {
			return
		}
		reason, msg := classify(err, keyOrigin(t.cfg.Edge.Key))
		t.setLinkState(l, State{Phase: PhaseConnecting, Reason: reason, Message: msg})
		l.log.Info("tunnel session ended, reconnecting", "reason", reason, "error", msg)
		if connectedFor > time.Minute {
			delay = t.backoff.Initial // a long healthy session: this is a fresh blip
		}
		// Full jitter in [delay/2, delay): many tunnels after an edge restart
		// must not reconnect in lockstep.
		wait := delay/2 + time.Duration(rand.Int64N(int64(delay/2)+1))
		if reconnectNow(err) {
			// The node is going away, not failing. When other nodes serve
			// the tunnel, this one is dropped until it comes back as a new
			// run; else (a single edge, the last node) it takes the session
			// again at once, restarted; a refused dial from here on backs
			// off from the start.
			if t.nodeShutDown(l) {
				return
			}
			wait, delay = 0, t.backoff.Initial
		}
		select {
		case <-l.ctx.Done():
			return
		case <-time.After(wait):
		}
		delay = min(delay*2, t.backoff.Max)
	}
}

// once runs one session: dial, bind, serve until it ends. It returns how long
// the link was connected and why it ended.
func (t *Tunnel) once(l *link) (time.Duration, error) {
	ctx := l.ctx
	ecfg := t.cfg.Edge
	ecfg.Addr = l.addr
	s, err := tunnelclient.Dial(ctx, ecfg)
	if err != nil {
		return 0, err
	}
	defer func() { _ = s.Close() }() // the session's end is reported by serve's result
	reply, err := s.Bind(ctx, t.bindRequest())
	if err != nil {
		return 0, err
	}
	start := time.Now()
	t.setLinkState(l, State{Phase: PhaseConnected, URL: reply.URL, SessionID: reply.SessionID, Reason: "Connected",
		Message: "the tunnel is connected and serving " + reply.URL})
	if reply.Nodes != nil {
		t.observe(l, *reply.Nodes)
	}
	t.linkUp()
	defer t.linkDown()

	var srv httpServer
	ln := s.Listener()
	if t.cfg.Bind.Protocol == protocol.ProtocolHTTP && t.traffic.Handler != nil {
		srv = t.httpServer()
		go func() { _ = srv.Serve(t.framedListener(ln)) }()
		defer func() { _ = srv.Close() }() // it only closes the listener of the ended session
	} else {
		go t.serveTCP(ln)
	}
	defer func() { _ = ln.Close() }()
	for {
		select {
		case <-ctx.Done():
			if g := time.Duration(max(t.grace.Load(), l.retire.Load())); g > 0 {
				t.drain(l, s, g)
			}
			return time.Since(start), ctx.Err()
		case <-s.Done():
			return time.Since(start), s.Err()
		case nl := <-s.Nodes():
			t.observe(l, nl)
		}
	}
}

// httpServer serves an http tunnel's channels: an http.Server, or the h1
// relay in front of one.
type httpServer interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
	Close() error
}

// httpServer returns the server of an http session's channels. A
// handler that can route for the h1 relay (an http Tunnel's proxy) gets
// the relay in front: plain requests have their head parsed once and are
// piped to the upstream; net/http serves the rest, as it serves every
// request of any other handler (an Ingress host's router).
func (t *Tunnel) httpServer() httpServer {
	srv := &http.Server{Handler: t.traffic.Handler, ReadHeaderTimeout: channelHeaderTimeout}
	httpfwd.Pin(srv) // plain requests keep their upstream per channel
	router, ok := t.traffic.Handler.(h1.Router)
	if !ok || t.traffic.NoRelay {
		return srv
	}
	// No timeouts: a channel's requests come from the edge, which bounds
	// the public client's pace itself, and an idle channel is the edge's
	// to close. Without deadlines the relay reads the channel directly,
	// not through chanconn's background reader.
	return &h1.Server{Router: router, Fallback: srv}
}

// channelHeaderTimeout bounds net/http's reading of a request's head on
// a channel.
const channelHeaderTimeout = 30 * time.Second

// drain asks the edge for no new connections, then waits up to grace
// for the edge to close the ones the session carries. The edge closes
// each kept HTTP channel as soon as it is idle (at once for those idle
// now, after its exchange for busy ones), so every request in flight, with
// or without a body, finishes and none is written into a channel that is
// closing; TCP streams end when their clients end them. The agent closes
// nothing itself until then: a close of its own could cross a request the
// edge is sending.
//
// Once nothing is open, the session leaves its pools (tuna-leave): the
// edge then opens nothing more on it. While it is the last live member of
// a pool (the replica that replaces this one has not joined it yet, in a
// rolling update), the edge refuses, and keeps routing to it: the session
// serves on and asks again, until another member joins or grace ends.
// What is still open at the end of grace is cut when the session closes.
func (t *Tunnel) drain(l *link, s *tunnelclient.Session, grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	start := time.Now()
	if err := s.Drain(ctx); err != nil {
		l.log.Info("the edge did not take the drain request; closing at once", "error", err.Error())
		return
	}
	l.log.Info("draining the tunnel session", "grace", grace.String(), "open", s.Open())
	for {
		if err := s.Quiet(ctx); err != nil {
			l.log.Info("connections still open at the end of the drain grace period", "error", err.Error())
			return
		}
		left, err := s.Leave(ctx)
		if err != nil {
			l.log.Info("the edge did not answer the leave request; closing", "error", err.Error())
			return
		}
		if left {
			break
		}
		select {
		case <-ctx.Done():
			l.log.Info("still the last live session of its address at the end of the drain grace period; closing")
			return
		case <-time.After(leavePoll):
		}
	}
	// A connection the edge opened just before the session left.
	if err := s.Quiet(ctx); err != nil {
		l.log.Info("connections still open at the end of the drain grace period", "error", err.Error())
		return
	}
	l.log.Info("tunnel session drained", "took", time.Since(start).String())
}

// leavePoll is how often a draining session that is the last of its pool
// asks again to leave.
const leavePoll = 100 * time.Millisecond

// serveTCP accepts until ln closes (the session ended), with the
// product's one accept policy, piping each connection to the upstream; the
// session counts it open until the pipe closes it.
func (t *Tunnel) serveTCP(ln net.Listener) {
	al := accept.Wrap(ln, func(err error, wait time.Duration) {
		t.log.Info("accepting a forwarded connection failed; retrying", "error", err.Error(), "retryIn", wait.String())
	})
	_ = accept.Serve(al, func(conn net.Conn) {
		addr := t.traffic.TCPAddr()
		if err := proxy.PipeTCP(conn, addr, t.hooks.Meter); err != nil {
			t.log.V(1).Info("upstream dial failed", "upstream", addr, "error", err.Error())
		}
	})
}

// reconnectNow reports an end of session that is no error: the edge shut
// down in order.
func reconnectNow(err error) bool {
	var term *tunnelclient.TerminatedError
	return errors.As(err, &term) && term.Code == protocol.CodeEdgeShuttingDown
}
