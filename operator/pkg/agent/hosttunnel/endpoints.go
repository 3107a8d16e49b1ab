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

// headless remembers which hosts dial an endpoint of which headless
// Service (upstream.Resolution.Endpoint), so that a change to the
// Service's EndpointSlices wakes those hosts at once, to dial another
// endpoint if theirs went. Services with a ClusterIP are not kept: kube-proxy
// follows their endpoints.
type headless struct {
	mu       sync.Mutex
	hosts    map[types.NamespacedName]map[string]bool // Service -> hosts
	services map[string][]types.NamespacedName        // host -> Services
}

// set records the headless Services host dials now (none: forget host).
func (h *headless) set(host string, svcs []types.NamespacedName) {
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

// requests are the host requests of the hosts that dial an endpoint of
// the Service an EndpointSlice belongs to.
func (h *headless) requests(_ context.Context, o client.Object) []reconcile.Request {
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

// endpointServices are the headless Services the host's routes dial.
func endpointServices(entries []entry, rules []gwEntry) []types.NamespacedName {
	var out []types.NamespacedName
	for _, e := range entries {
		if e.endpointOf.Name != "" {
			out = append(out, e.endpointOf)
		}
	}
	for _, e := range rules {
		for _, b := range e.backends {
			if b.endpointOf.Name != "" {
				out = append(out, b.endpointOf)
			}
		}
	}
	return out
}
