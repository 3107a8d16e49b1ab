// Package session runs one tunnel in the agent: it dials the edge, binds the
// tunnel's address, serves forwarded connections through the proxy, and
// reconnects with backoff and jitter when the session ends. It reports state
// changes through a callback so the agent's reconciler can write status.
package session

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/proxy"
)

// Config is what identifies a tunnel's connection: a change of any field
// needs a new session. Upstream changes do not; see Tunnel.SetUpstream.
type Config struct {
	Edge tunnelclient.Config
	Bind protocol.BindRequest
}

// Phase of a tunnel.
type Phase string

const (
	PhaseConnecting Phase = "Connecting"
	PhaseConnected  Phase = "Connected"
)

// State is a tunnel's observable state.
type State struct {
	Phase     Phase
	URL       string
	SessionID string
	// Reason is a condition reason (CamelCase) and Message explains it;
	// set while not connected after a failure.
	Reason  string
	Message string
}

// Backoff bounds the reconnect delay.
type Backoff struct {
	Initial, Max time.Duration
}

// DefaultBackoff reconnects fast after a blip and settles at 30s.
var DefaultBackoff = Backoff{Initial: 250 * time.Millisecond, Max: 30 * time.Second}

// Traffic is what a tunnel serves: each forwarded connection of an http
// tunnel goes to Handler; each one of a tcp tunnel is piped to TCPAddr().
// Both may change what they do while the session stays up.
type Traffic struct {
	Handler http.Handler
	TCPAddr func() string
}

// Tunnel is one running tunnel.
type Tunnel struct {
	cfg     Config
	traffic Traffic
	notify  func()
	log     logr.Logger
	backoff Backoff
	hooks   Hooks

	mu    sync.Mutex
	state State

	cancel context.CancelFunc
	done   chan struct{}
	// grace, set by Drain, is how long the last session may finish its
	// connections once the tunnel is stopped.
	grace atomic.Int64
}

// Hooks observe a tunnel for metrics; nil fields are skipped.
type Hooks struct {
	Connected    func()
	Disconnected func()
	Attempt      func(reconnect bool)
	// Meter observes the tunnel's traffic.
	Meter proxy.Meter
}

// Start runs a tunnel until Stop. notify is called (without locks held)
// whenever State changes.
func Start(cfg Config, traffic Traffic, backoff Backoff, hooks Hooks, log logr.Logger, notify func()) *Tunnel {
	ctx, cancel := context.WithCancel(context.Background())
	t := &Tunnel{
		cfg: cfg, traffic: traffic, notify: notify, log: log, backoff: backoff, hooks: hooks,
		state:  State{Phase: PhaseConnecting, Reason: "Connecting", Message: "connecting to the edge"},
		cancel: cancel, done: make(chan struct{}),
	}
	go t.run(ctx)
	return t
}

// Config returns the connection config the tunnel runs with.
func (t *Tunnel) Config() Config { return t.cfg }

// State returns the current state.
func (t *Tunnel) State() State {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state
}

// Stop ends the tunnel and waits for it to finish.
func (t *Tunnel) Stop() {
	t.cancel()
	<-t.done
}

// Drain ends the tunnel gracefully (agent shutdown): it tells the edge to
// send the session no new connections, so the edge sends them to the other
// replicas of the tunnel's pool, lets the requests and TCP streams in
// flight finish for up to grace, then closes the session.
func (t *Tunnel) Drain(grace time.Duration) {
	t.grace.Store(int64(max(grace, time.Nanosecond)))
	t.Stop()
}

func (t *Tunnel) setState(s State) {
	t.mu.Lock()
	changed := !reflect.DeepEqual(t.state, s)
	t.state = s
	t.mu.Unlock()
	if changed && t.notify != nil {
		t.notify()
	}
}

func (t *Tunnel) run(ctx context.Context) {
	defer close(t.done)
	delay := t.backoff.Initial
	for attempt := 0; ; attempt++ {
		if t.hooks.Attempt != nil {
			t.hooks.Attempt(attempt > 0)
		}
		connectedFor, err := t.once(ctx)
		if ctx.Err() != nil {
			return
		}
		reason, msg := classify(err)
		t.setState(State{Phase: PhaseConnecting, Reason: reason, Message: msg})
		t.log.Info("tunnel session ended, reconnecting", "reason", reason, "error", msg)
		if connectedFor > time.Minute {
			delay = t.backoff.Initial // a long healthy session: this is a fresh blip
		}
		// Full jitter in [delay/2, delay): many tunnels after an edge restart
		// must not reconnect in lockstep.
		wait := delay/2 + time.Duration(rand.Int64N(int64(delay/2)+1))
		if reconnectNow(err) {
			// The edge (a node of it) is going away, not failing: another
			// node, or the same one restarted, takes the session at once;
			// a refused dial from here on backs off from the start.
			wait, delay = 0, t.backoff.Initial
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		delay = min(delay*2, t.backoff.Max)
	}
}

// once runs one session: dial, bind, serve until it ends. It returns how long
// the tunnel was connected and why it ended.
func (t *Tunnel) once(ctx context.Context) (time.Duration, error) {
	s, err := tunnelclient.Dial(ctx, t.cfg.Edge)
	if err != nil {
		return 0, err
	}
	defer func() { _ = s.Close() }() // the session's end is reported by serve's result
	reply, err := s.Bind(ctx, t.cfg.Bind)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	t.setState(State{Phase: PhaseConnected, URL: reply.URL, SessionID: reply.SessionID, Reason: "Connected",
		Message: "the tunnel is connected and serving " + reply.URL})
	if t.hooks.Connected != nil {
		t.hooks.Connected()
	}
	defer func() {
		if t.hooks.Disconnected != nil {
			t.hooks.Disconnected()
		}
	}()

	var srv *http.Server
	streams := &tcpStreams{accepting: make(chan struct{})}
	ln := s.Listener()
	if t.cfg.Bind.Protocol == protocol.ProtocolHTTP {
		srv = &http.Server{Handler: t.traffic.Handler, ReadHeaderTimeout: 30 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer func() { _ = srv.Close() }() // it only closes the listener of the ended session
	} else {
		go t.serveTCP(ln, streams)
	}
	defer func() { _ = ln.Close() }()
	select {
	case <-ctx.Done():
		if g := time.Duration(t.grace.Load()); g > 0 {
			t.drain(s, ln, srv, streams, g)
		}
		return time.Since(start), ctx.Err()
	case <-s.Done():
		return time.Since(start), s.Err()
	}
}

// drain asks the edge for no new connections, then waits up to grace for
// those in flight: http.Server.Shutdown closes idle keep-alive channels
// (the edge dials new ones on another replica) and waits for active
// requests; TCP streams are waited for. Channels the edge opened just
// before the drain and nobody accepted fail when the session closes, and
// the edge retries them on another session of the pool.
func (t *Tunnel) drain(s *tunnelclient.Session, ln net.Listener, srv *http.Server, streams *tcpStreams, grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := s.Drain(ctx); err != nil {
		t.log.Info("the edge did not take the drain request; closing at once", "error", err.Error())
		return
	}
	t.log.Info("draining the tunnel session", "grace", grace.String())
	if srv != nil {
		if err := srv.Shutdown(ctx); err != nil {
			t.log.Info("requests still in flight at the end of the drain grace period", "error", err.Error())
		}
		return
	}
	_ = ln.Close()
	done := make(chan struct{})
	go func() {
		<-streams.accepting // no Add after this
		streams.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.log.Info("TCP streams still open at the end of the drain grace period")
	}
}

// tcpStreams counts a session's open TCP pipes; accepting closes when the
// accept loop has returned, after which the count only falls.
type tcpStreams struct {
	wg        sync.WaitGroup
	accepting chan struct{}
}

// serveTCP accepts until ln closes.
func (t *Tunnel) serveTCP(ln net.Listener, streams *tcpStreams) {
	defer close(streams.accepting)
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		addr := t.traffic.TCPAddr()
		streams.wg.Add(1)
		go func() {
			defer streams.wg.Done()
			if err := proxy.PipeTCP(conn, addr, t.hooks.Meter); err != nil {
				t.log.V(1).Info("upstream dial failed", "upstream", addr, "error", err.Error())
			}
		}()
	}
}

// reconnectNow reports an end of session that is no error: the edge shut
// down in order.
func reconnectNow(err error) bool {
	var term *tunnelclient.TerminatedError
	return errors.As(err, &term) && term.Code == protocol.CodeEdgeShuttingDown
}

// classify maps why a session ended to a condition reason and a message
// that tells the user what to do.
func classify(err error) (reason, message string) {
	var term *tunnelclient.TerminatedError
	var bind *tunnelclient.BindError
	var auth *tunnelclient.AuthError
	switch {
	case err == nil:
		return "Connecting", "the session ended; reconnecting"
	case errors.As(err, &term):
		if term.Code == protocol.CodeKeyRevoked {
			return "KeyRevoked", "the edge revoked this tunnel's key: " + term.Reason
		}
		if term.Code == protocol.CodeAddressOwned {
			return "AddressOwned", term.Reason + "; ask the address's owner to add this namespace to spec.sharedWith, or choose another address"
		}
		return "EdgeUnreachable", "the edge ended the session (" + term.Code + "): " + term.Reason + "; reconnecting"
	case errors.As(err, &bind):
		switch bind.Code {
		case protocol.CodeAddressTaken:
			return "AddressTaken", bind.Message + ": another tunnel holds this address; choose another or stop the other tunnel"
		case protocol.CodeAddressOwned:
			return "AddressOwned", bind.Message
		case protocol.CodeAddressNotFound:
			return "EndpointNotReady", bind.Message
		case protocol.CodeForbidden:
			return "APIKeyInvalid", bind.Message
		}
		return "EdgeUnreachable", "the edge refused the bind: " + bind.Message
	case errors.As(err, &auth):
		if strings.Contains(auth.Error(), "revoked") {
			return "KeyRevoked", "the edge refused the tunnel's key: " + auth.Error()
		}
		return "APIKeyInvalid", "the edge refused the tunnel's key: " + auth.Error()
	}
	return "EdgeUnreachable", "cannot reach the edge: " + err.Error() + "; retrying with backoff"
}
