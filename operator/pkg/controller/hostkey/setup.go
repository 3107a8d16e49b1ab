package hostkey

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"

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
	b, err := ingress.Watch(mgr, ctrl.NewControllerManagedBy(mgr).Named("ingress-keys"), true)
	if err != nil {
		return err
	}
	ctl, err := b.
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
	return gateway.WatchHosts(mgr, r.ctl, func() { r.gateways.Store(true) })
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
