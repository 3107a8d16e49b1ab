// Package session runs one tunnel in the agent: it dials the edge, binds the
// tunnel's address, serves forwarded connections through the proxy, and
// reconnects with backoff and jitter when the session ends. With a cluster
// of edges it holds such a session (a link) to every live node the edge
// lists (nodes.go), so every node serves the tunnel. It reports state
// changes through a callback so the agent's reconciler can write status.
package session

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
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
	// Sessions is how many edge nodes hold a live session of the tunnel
	// (one with a single edge; 0 while not connected).
	Sessions int
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
//
// An http tunnel without a Handler has its channels piped to TCPAddr() as
// they come, so HTTP is parsed once, by the edge. The agent then keeps no
// per-request metrics, answers no 502 of its own (the edge answers one when
// the channel closes without an answer), and its drain waits for every
// channel, idle or not, up to the grace period. The transport bench
// measures that path against the parsing agent (-pipe-http).
//
// A Handler that is also an h1.Router (an http Tunnel's proxy.HTTP) has
// its plain requests relayed by package h1, their heads parsed once and
// their bodies piped, unless NoRelay is set; net/http serves the rest.
//
// Frames says whether the agent takes the edge's HTTP/2 streams in frames
// (frames.go) or as HTTP/1.1 on channels; see Frames.
type Traffic struct {
	Handler http.Handler
	TCPAddr func() string
	NoRelay bool
	Frames  Frames
}

// Tunnel is one running tunnel: a link to the edge address it was given
// and, with a cluster of edges, one to every other live node.
type Tunnel struct {
	cfg     Config
	traffic Traffic
	notify  func()
	log     logr.Logger
	backoff Backoff
	hooks   Hooks

	ctx    context.Context
	cancel context.CancelFunc
	// links counts running links, retiring ones included.
	links sync.WaitGroup
	// grace, set by Drain, is how long the last sessions may finish their
	// connections once the tunnel is stopped.
	grace atomic.Int64

	mu sync.Mutex
	// state is the merged state of the links, as last reported.
	state State
	// byAddr are the current links by edge address; views the latest node
	// list each connected link's node sent; dropped the IDs of node runs
	// that shut down (nodes.go).
	byAddr  map[string]*link
	views   map[*link]protocol.NodeList
	dropped map[string]bool
	stopped bool

	// served: a link of the tunnel has held a session, once at least.
	served atomic.Bool
	// started is when Start ran, for Opening.
	started time.Time

	// hookMu orders the Connected and Disconnected hooks, called when the
	// first link connects and the last one ends.
	hookMu sync.Mutex
	up     int
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
		state:   connecting(),
		started: time.Now(),
		ctx:     ctx,
		cancel:  cancel,
		byAddr:  map[string]*link{}, views: map[*link]protocol.NodeList{}, dropped: map[string]bool{},
	}
	t.mu.Lock()
	t.startLink(cfg.Edge.Addr, "")
	t.mu.Unlock()
	return t
}

func connecting() State {
	return State{Phase: PhaseConnecting, Reason: "Connecting", Message: "connecting to the edge"}
}

// Served reports whether the tunnel has held an edge session since it
// started, once at least.
func (t *Tunnel) Served() bool { return t.served.Load() }

// Opening reports how long ago the tunnel started while its first connect
// is still under way: no link has held a session or failed since Start.
// The state then says nothing a status needs: the attempt ends within the
// dial timeout, and its end changes the state (and calls notify).
func (t *Tunnel) Opening() (time.Duration, bool) {
	if t.served.Load() {
		return 0, false
	}
	t.mu.Lock()
	first := t.state == connecting()
	t.mu.Unlock()
	if !first {
		return 0, false
	}
	return time.Since(t.started), true
}

// Config returns the connection config the tunnel runs with.
func (t *Tunnel) Config() Config { return t.cfg }

// State returns the current state: connected while any link is, with the
// url and session of the first connected link by address.
func (t *Tunnel) State() State {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state
}

// Stop ends the tunnel and waits for it to finish.
func (t *Tunnel) Stop() {
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
	t.cancel()
	t.links.Wait()
}

// Drain ends the tunnel gracefully (agent shutdown): it tells the edge to
// send the session no new connections, so the edge sends them to the other
// replicas of the tunnel's pool, lets the requests and TCP streams in
// flight finish for up to grace, then closes the session; every link does
// so at once.
func (t *Tunnel) Drain(grace time.Duration) {
	t.grace.Store(int64(max(grace, time.Nanosecond)))
	t.Stop()
}

// setLinkState records a link's state and reports the merged one.
func (t *Tunnel) setLinkState(l *link, s State) {
	t.mu.Lock()
	l.state = s
	if s.Phase != PhaseConnected {
		delete(t.views, l) // its node's list is no longer live
		t.fallBackLocked()
	}
	changed := t.mergeLocked()
	t.mu.Unlock()
	if changed && t.notify != nil {
		t.notify()
	}
}

// mergeLocked recomputes t.state from the current links and reports
// whether it changed; t.mu is held.
func (t *Tunnel) mergeLocked() bool {
	addrs := make([]string, 0, len(t.byAddr))
	for a := range t.byAddr {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	var merged *State
	n := 0
	for _, a := range addrs {
		if st := t.byAddr[a].state; st.Phase == PhaseConnected {
			n++
			if merged == nil {
				merged = &st
			}
		}
	}
	var s State
	switch {
	case merged != nil:
		s = *merged
		s.Sessions = n
		if n > 1 {
			s.Message = fmt.Sprintf("the tunnel is connected through %d edge nodes and serving %s", n, s.URL)
		}
	case t.byAddr[t.cfg.Edge.Addr] != nil:
		s = t.byAddr[t.cfg.Edge.Addr].state
	case len(addrs) > 0:
		s = t.byAddr[addrs[0]].state
	default:
		return false // stopping: the last state stands
	}
	changed := !reflect.DeepEqual(t.state, s)
	t.state = s
	return changed
}

// linkUp and linkDown call the Connected and Disconnected hooks for the
// tunnel as a whole: connected while any link is.
func (t *Tunnel) linkUp() {
	t.served.Store(true)
	t.hookMu.Lock()
	defer t.hookMu.Unlock()
	if t.up++; t.up == 1 && t.hooks.Connected != nil {
		t.hooks.Connected()
	}
}

func (t *Tunnel) linkDown() {
	t.hookMu.Lock()
	defer t.hookMu.Unlock()
	if t.up--; t.up == 0 && t.hooks.Disconnected != nil {
		t.hooks.Disconnected()
	}
}
