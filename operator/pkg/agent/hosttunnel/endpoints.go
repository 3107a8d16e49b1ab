package hosttunnel

import (
	"context"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

// sliceWakes remembers which hosts follow the EndpointSlices of which
// Service (upstream.Resolution.FollowsSlices), so that a change to them
// wakes those hosts at once: a headless Service's, to dial another
// endpoint if theirs went; a missing Service's, to serve it as soon as it
// is created (the agent may not watch Services, and its slices come with
// it). Services with a ClusterIP are not kept: kube-proxy follows their
// endpoints.
type sliceWakes struct {
	mu       sync.Mutex
	hosts    map[types.NamespacedName]map[string]bool // Service -> hosts
	services map[string][]types.NamespacedName        // host -> Services
}

// set records the Services whose slices host follows now (none: forget host).
func (h *sliceWakes) set(host string, svcs []types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hosts == nil {
		h.hosts, h.services = map[types.NamespacedName]map[string]bool{}, map[string][]types.NamespacedName{}
	}
	for _, s := range h.services[host] {
		delete(h.hosts[s], host)
		if len(h.hosts[s]) == 0 {
			delete(h.hosts, s)
		}
	}
	delete(h.services, host)
	for _, s := range svcs {
		if h.hosts[s] == nil {
			h.hosts[s] = map[string]bool{}
		}
		if !h.hosts[s][host] {
			h.hosts[s][host] = true
			h.services[host] = append(h.services[host], s)
		}
	}
}

// requests are the host requests of the hosts that follow the slices of
// the Service an EndpointSlice belongs to.
func (h *sliceWakes) requests(_ context.Context, o client.Object) []reconcile.Request {
	svc := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetLabels()[discoveryv1.LabelServiceName]}
	if svc.Name == "" {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]reconcile.Request, 0, len(h.hosts[svc]))
	for host := range h.hosts[svc] {
		out = append(out, pubhost.Request(host))
	}
	return out
}

// sliceServices are the Services whose slices the host's routes follow.
func sliceServices(entries []entry, rules []gwEntry) []types.NamespacedName {
	var out []types.NamespacedName
	for _, e := range entries {
		if e.slicesOf.Name != "" {
			out = append(out, e.slicesOf)
		}
	}
	for _, e := range rules {
		for _, b := range e.backends {
			if b.slicesOf.Name != "" {
				out = append(out, b.slicesOf)
			}
		}
	}
	return out
}
