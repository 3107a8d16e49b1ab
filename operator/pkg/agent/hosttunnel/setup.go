package hosttunnel

import (
	"fmt"

	discoveryv1 "k8s.io/api/discovery/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/ingress"
)

// SetupWithManager registers the reconciler: Ingress and IngressClass
// changes wake the hosts they concern, a Service's EndpointSlices wake the
// hosts that dial its endpoints (headless) or wait for it to be created,
// and each host's tunnel wakes its
// host when its state changes. Gateway API kinds are watched from
// ServeGateways on.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b, err := ingress.Watch(mgr, ctrl.NewControllerManagedBy(mgr).Named("ingress-agent"), false)
	if err != nil {
		return err
	}
	ctl, err := b.
		// Metadata only: which Service a slice is of is all the wake
		// needs; the endpoints are listed when the host resolves.
		WatchesMetadata(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(r.sliceWakes.requests)).
		WatchesRawSource(r.wakes.Source()).
		Build(r)
	r.ctl = ctl
	return err
}

// ServeGateways serves the HTTPRoutes of the operator's Gateways on their
// hosts, next to the Ingress paths: Gateway hosts share the Ingress
// hosts' keys, tunnels and routers. Call it once, after SetupWithManager,
// when the API server serves the Gateway API (before or after the manager
// started).
func (r *Reconciler) ServeGateways(mgr ctrl.Manager) error {
	c := mgr.GetCache()
	return gateway.WatchHosts(mgr, r.ctl, func() { r.gateways.Store(true) },
		source.Kind(c, client.Object(&gwv1.HTTPRoute{}), gateway.HostHandler(mgr.GetClient()), predicate.GenerationChangedPredicate{}),
		// A grant given or taken back changes which backendRefs are served.
		source.Kind(c, client.Object(&gwv1.ReferenceGrant{}), gateway.AllHostsHandler(mgr.GetClient())))
}

// ServeBackendTLSPolicies verifies https backendRefs by their
// BackendTLSPolicy; call it once, after ServeGateways, when the API server
// serves BackendTLSPolicy.
func (r *Reconciler) ServeBackendTLSPolicies(mgr ctrl.Manager) error {
	r.tlsPolicies.Store(true)
	src := source.Kind(mgr.GetCache(), client.Object(&gwv1.BackendTLSPolicy{}), gateway.AllHostsHandler(mgr.GetClient()),
		predicate.GenerationChangedPredicate{})
	if err := r.ctl.Watch(src); err != nil {
		return fmt.Errorf("watching BackendTLSPolicies: %w", err)
	}
	return nil
}
