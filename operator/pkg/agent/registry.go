// Package agent is the tunnels component: it runs every tunnel of the
// cluster inside its pod. The Registry owns the running tunnels; the
// Reconciler decides what each one should be and reports its status.
package agent

import (
	"reflect"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/proxy"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/session"
)

// Registry holds the running tunnels, keyed by their resource.
type Registry struct {
	log     logr.Logger
	backoff session.Backoff
	hooks   func(types.NamespacedName) session.Hooks
	forget  func(types.NamespacedName)
	// events wakes the reconciler when a tunnel's state changes.
	events chan event.GenericEvent

	mu      sync.Mutex
	tunnels map[types.NamespacedName]*session.Tunnel
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
		events:  make(chan event.GenericEvent, 1024),
		tunnels: map[types.NamespacedName]*session.Tunnel{},
	}
}

// Events is the channel of state changes, for a controller source.
func (r *Registry) Events() <-chan event.GenericEvent { return r.events }

// Ensure makes the tunnel of key run with cfg and send traffic to up. A
// changed upstream is swapped in place; a changed connection config
// restarts the session.
func (r *Registry) Ensure(key types.NamespacedName, cfg session.Config, up proxy.Upstream) *session.Tunnel {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.tunnels[key]; ok {
		if reflect.DeepEqual(t.Config(), cfg) {
			t.SetUpstream(up)
			return t
		}
		r.log.Info("tunnel config changed, reconnecting", "tunnel", key.String())
		go t.Stop()
	}
	t := session.Start(cfg, up, r.backoff, r.hooks(key), r.log.WithValues("tunnel", key.String()), func() { r.wake(key) })
	r.tunnels[key] = t
	return t
}

// Get returns the running tunnel of key, or nil.
func (r *Registry) Get(key types.NamespacedName) *session.Tunnel {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tunnels[key]
}

// Stop ends the tunnel of key, if it runs.
func (r *Registry) Stop(key types.NamespacedName) {
	r.mu.Lock()
	t, ok := r.tunnels[key]
	delete(r.tunnels, key)
	r.mu.Unlock()
	if ok {
		t.Stop()
		r.forget(key)
	}
}

// StopAll ends every tunnel (agent shutdown).
func (r *Registry) StopAll() {
	r.mu.Lock()
	all := r.tunnels
	r.tunnels = map[types.NamespacedName]*session.Tunnel{}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, t := range all {
		wg.Add(1)
		go func() { defer wg.Done(); t.Stop() }()
	}
	wg.Wait()
}

// wake enqueues key without blocking the session that changed state.
func (r *Registry) wake(key types.NamespacedName) {
	obj := &tunav1.Tunnel{}
	obj.Namespace, obj.Name = key.Namespace, key.Name
	select {
	case r.events <- event.GenericEvent{Object: obj}:
	default:
		go func() { r.events <- event.GenericEvent{Object: obj} }()
	}
}
