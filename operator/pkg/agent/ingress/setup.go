package ingress

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
	model "code.tuna.am/tuna/k8s-operator/operator/pkg/ingress"
)

// SetupWithManager registers the reconciler: Ingress and IngressClass
// changes wake the hosts they concern, and each host's tunnel wakes its
// host when its state changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &networkingv1.Ingress{}, model.HostIndex, model.IndexHosts); err != nil {
		return fmt.Errorf("indexing Ingresses by host: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("ingress-agent").
		Watches(&networkingv1.Ingress{}, model.Handler(mgr.GetClient(), false), builder.WithPredicates(model.Changed)).
		Watches(&networkingv1.IngressClass{}, model.ClassHandler(mgr.GetClient(), false)).
		WatchesRawSource(r.wakes.Source())
	if r.Gateways {
		// Gateway hosts share the Ingress hosts' keys, tunnels and routers.
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), &gwv1.Gateway{}, gateway.HostIndex, gateway.IndexHosts); err != nil {
			return fmt.Errorf("indexing Gateways by host: %w", err)
		}
		b = b.Watches(&gwv1.GatewayClass{}, gateway.AllHostsHandler(mgr.GetClient()), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
			Watches(&gwv1.Gateway{}, gateway.HostHandler(mgr.GetClient()), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
			Watches(&gwv1.HTTPRoute{}, gateway.HostHandler(mgr.GetClient()), builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	if r.Gateways {
		// A grant given or taken back changes which backendRefs are served.
		b = b.Watches(&gwv1.ReferenceGrant{}, gateway.AllHostsHandler(mgr.GetClient()))
	}
	if r.BackendTLSPolicies {
		b = b.Watches(&gwv1.BackendTLSPolicy{}, gateway.AllHostsHandler(mgr.GetClient()), builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	return b.Complete(r)
}
