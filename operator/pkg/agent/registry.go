// Package agent is the tunnels component: it runs every tunnel of the
// cluster inside its pod. The Registry owns the running tunnels; the
// reconcilers decide what each one should be and report its status.
package agent

import (
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/source"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/proxy"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/session"
)

// Registry holds the running tunnels, keyed by the resource they serve
// (a Tunnel, or an Ingress host under a key its reconciler chooses).
type Registry struct {
	log     logr.Logger
	backoff session.Backoff
	hooks   func(types.NamespacedName) session.Hooks
	forget  func(types.NamespacedName)
	// wake wakes the Tunnel reconciler when a tunnel's state changes.
	wake Waker

	mu      sync.Mutex
	tunnels map[types.NamespacedName]*entry
}

// entry is a running tunnel and, for a Tunnel resource, the upstream it
// proxies to, which changes in place.
type entry struct {
	tunnel *session.Tunnel
	http   *proxy.HTTP                     // http Tunnel resources
	tcp    *atomic.Pointer[proxy.Upstream] // tcp Tunnel resources
}

// NewRegistry returns an empty registry. hooks gives each tunnel its
// observers; forget drops what they recorded once the tunnel is gone. Both
// may be nil.
func NewRegistry(log logr.Logger, backoff session.Backoff, hooks func(types.NamespacedName) session.Hooks, forget func(types.NamespacedName)) *Registry {
	if hooks == nil {
		hooks = func(types.NamespacedName) session.Hooks { return session.Hooks{} }
	}
	if forget == nil {
		forget = func(types.NamespacedName) {}
	}
	return &Registry{
		log: log, backoff: backoff, hooks: hooks, forget: forget,
		tunnels: map[types.NamespacedName]*entry{},
	}
}

// Wakes is the source of the Tunnel reconciles that tunnels' state
// changes ask for.
func (r *Registry) Wakes() source.Source { return r.wake.Source() }

// Ensure makes the tunnel of a Tunnel resource run with cfg and send
// traffic to up. A changed upstream is swapped in place; a changed
// connection config restarts the session.
func (r *Registry) Ensure(key types.NamespacedName, cfg session.Config, up proxy.Upstream) *session.Tunnel {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.tunnels[key]; ok && reflect.DeepEqual(e.tunnel.Config(), cfg) && (e.http != nil || e.tcp != nil) {
		if e.http != nil {
			e.http.SetUpstream(up)
		} else {
			e.tcp.Store(&up)
		}
		return e.tunnel
	}
	e := &entry{}
	traffic := session.Traffic{}
	hooks := r.hooks(key)
	if cfg.Bind.Protocol == "http" {
		e.http = proxy.NewHTTP(up, hooks.Meter)
		traffic.Handler = e.http
	} else {
		e.tcp = &atomic.Pointer[proxy.Upstream]{}
		e.tcp.Store(&up)
		traffic.TCPAddr = func() string { return e.tcp.Load().Addr }
	}
	r.start(key, cfg, traffic, hooks, e, func() { r.wakeTunnel(key) })
	return e.tunnel
}

// EnsureHandler makes the tunnel of key run with cfg and serve handler,
// which routes requests itself (an Ingress host's router). A changed config
// restarts the session; the handler is kept while the config is the same,
// so route changes swapped inside it never reconnect. wake is called when
// the tunnel's state changes.
func (r *Registry) EnsureHandler(key types.NamespacedName, cfg session.Config, handler http.Handler, wake func()) *session.Tunnel {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.tunnels[key]; ok && reflect.DeepEqual(e.tunnel.Config(), cfg) {
		return e.tunnel
	}
	e := &entry{}
	r.start(key, cfg, session.Traffic{Handler: handler}, r.hooks(key), e, wake)
	return e.tunnel
}

// start replaces any tunnel of key by a new one; r.mu is held.
func (r *Registry) start(key types.NamespacedName, cfg session.Config, traffic session.Traffic, hooks session.Hooks, e *entry, wake func()) {
	if old, ok := r.tunnels[key]; ok {
		r.log.Info("tunnel config changed, reconnecting", "tunnel", key.String())
		go old.tunnel.Stop()
	}
	e.tunnel = session.Start(cfg, traffic, r.backoff, hooks, r.log.WithValues("tunnel", key.String()), wake)
	r.tunnels[key] = e
}

// Get returns the running tunnel of key, or nil.
func (r *Registry) Get(key types.NamespacedName) *session.Tunnel {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.tunnels[key]; ok {
		return e.tunnel
	}
	return nil
}

// Stop ends the tunnel of key, if it runs.
func (r *Registry) Stop(key types.NamespacedName) {
	r.mu.Lock()
	e, ok := r.tunnels[key]
	delete(r.tunnels, key)
	r.mu.Unlock()
	if ok {
		e.tunnel.Stop()
		r.forget(key)
	}
}

// StopAll ends every tunnel (agent shutdown).
func (r *Registry) StopAll() { r.DrainAll(0) }

// DrainAll ends every tunnel gracefully (agent shutdown, see
// session.Tunnel.Drain), in parallel, within about grace; grace 0 stops them
// at once.
func (r *Registry) DrainAll(grace time.Duration) {
	r.mu.Lock()
	all := r.tunnels
	r.tunnels = map[types.NamespacedName]*entry{}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if grace > 0 {
				e.tunnel.Drain(grace)
			} else {
				e.tunnel.Stop()
			}
		}()
	}
	wg.Wait()
}

// wakeTunnel enqueues a Tunnel without blocking the session that changed
// state.
func (r *Registry) wakeTunnel(key types.NamespacedName) { r.wake.Wake(key) }

// EdgeReady is the agent's readiness: an error while it runs tunnels and
// none of them holds a live session because the edge cannot be reached
// or has not been reached yet. So a new replica of a rolling update is
// Ready once it serves, and a replica cut off from the edge is not. A
// tunnel refused for its own reasons (a revoked key, a taken address)
// says nothing about the edge: it leaves the replica Ready.
func (r *Registry) EdgeReady() error {
	r.mu.Lock()
	tunnels := make([]*session.Tunnel, 0, len(r.tunnels))
	for _, e := range r.tunnels {
		tunnels = append(tunnels, e.tunnel)
	}
	r.mu.Unlock()
	states := make([]tunnelReadiness, len(tunnels))
	for i, t := range tunnels {
		states[i] = tunnelReadiness{State: t.State(), Served: t.Served()}
	}
	return edgeReadiness(states)
}

// tunnelReadiness is what readiness looks at of one tunnel.
type tunnelReadiness struct {
	session.State
	// Served: it has held an edge session since it started.
	Served bool
}

// edgeReadiness is the agent's readiness from its tunnels' states: not
// ready while none holds a session though some wait for the edge (an
// agent cut off from it), nor while a tunnel waits for its first session.
// A replica that replaces another in a rolling update is thus Ready once
// it serves every tunnel it can, and the old one's sessions, which drain
// only then, are never the last of their pools. A tunnel refused for its
// spec waits for no edge and counts for nothing.
func edgeReadiness(tunnels []tunnelReadiness) error {
	connected, waiting, fresh, message := 0, 0, 0, ""
	for _, t := range tunnels {
		if t.Phase == session.PhaseConnected {
			connected++
			continue
		}
		if t.Reason == tunav1.ReasonConnecting || t.Reason == tunav1.ReasonEdgeUnreachable {
			waiting++
			message = t.Message
			if !t.Served {
				fresh++
			}
		}
	}
	switch {
	case waiting > 0 && connected == 0:
		return fmt.Errorf("none of the %d tunnels holds an edge session (%d waiting for the edge): %s", len(tunnels), waiting, message)
	case fresh > 0:
		return fmt.Errorf("%d of the %d tunnels have not held an edge session yet: %s", fresh, len(tunnels), message)
	}
	return nil
}
