package hostkey

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/ingress"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

// SetupWithManager registers the reconciler. Its requests are hosts (for
// keys) and Ingresses (for their rules): an Ingress change wakes both, an
// IngressClass change every Ingress it may concern, and a Domain change
// the host it reserves. Gateways are watched from ServeGateways on.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &networkingv1.Ingress{}, pubhost.Index, ingress.Source.IndexHosts); err != nil {
		return fmt.Errorf("indexing Ingresses by host: %w", err)
	}
	ctl, err := ctrl.NewControllerManagedBy(mgr).
		Named("ingress-keys").
		Watches(&networkingv1.Ingress{}, ingress.Handler(mgr.GetClient(), true), builder.WithPredicates(ingress.Changed)).
		Watches(&networkingv1.IngressClass{}, ingress.ClassHandler(mgr.GetClient(), true)).
		Watches(&tunav1.Domain{}, handler.Funcs{
			CreateFunc: func(ctx context.Context, e event.CreateEvent, q pubhost.Queue) {
				r.enqueueDomainHosts(ctx, q, e.Object)
			},
			UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q pubhost.Queue) {
				r.enqueueDomainHosts(ctx, q, e.ObjectOld, e.ObjectNew)
			},
			DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q pubhost.Queue) {
				r.enqueueDomainHosts(ctx, q, e.Object)
			},
		}).
		Build(r)
	r.ctl = ctl
	return err
}

// ServeGateways publishes Gateway listeners' hosts too: each gets its key
// as an Ingress host does. Call it once, after SetupWithManager, when the
// API server serves the Gateway API (before or after the manager started).
func (r *Reconciler) ServeGateways(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &gwv1.Gateway{}, pubhost.Index, gateway.Source.IndexHosts); err != nil {
		return fmt.Errorf("indexing Gateways by host: %w", err)
	}
	// On once the index is there, before the watches, whose first lists
	// wake the hosts of the Gateways that exist.
	r.gateways.Store(true)
	generation := predicate.GenerationChangedPredicate{}
	for _, src := range []source.Source{
		source.Kind(mgr.GetCache(), client.Object(&gwv1.GatewayClass{}), gateway.AllHostsHandler(mgr.GetClient()), generation),
		source.Kind(mgr.GetCache(), client.Object(&gwv1.Gateway{}), gateway.HostHandler(mgr.GetClient()), gateway.HostsChanged()),
	} {
		if err := r.ctl.Watch(src); err != nil {
			return fmt.Errorf("watching the Gateway API: %w", err)
		}
	}
	return nil
}

// ServesGateways reports whether ServeGateways ran.
func (r *Reconciler) ServesGateways() bool { return r.gateways.Load() }

// enqueueDomainHosts wakes the hosts a Domain reserves (before and after a
// change) when a served Ingress has a rule for them.
func (r *Reconciler) enqueueDomainHosts(ctx context.Context, q pubhost.Queue, objs ...client.Object) {
	var hosts []string
	for _, o := range objs {
		if d, ok := o.(*tunav1.Domain); ok && d != nil && d.Status.FQDN != "" {
			hosts = append(hosts, d.Status.FQDN)
		}
	}
	if len(hosts) == 0 {
		return
	}
	for _, h := range hosts {
		if ns, err := r.publishers(ctx, h, nil); err == nil && len(ns) > 0 {
			q.Add(pubhost.Request(h))
			continue
		}
		if ings, err := ingress.Source.ServedFor(ctx, r.Client, h); err == nil && len(ings) > 0 {
			q.Add(pubhost.Request(h))
		}
	}
}
