package tunnelkey

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/base"
)

// domainRefIndex indexes Tunnels by the Domain they reference.
const domainRefIndex = "spec.domainRef.name"

// SetupWithManager registers the reconciler. Only spec changes (and
// deletion, which bumps the generation of custom resources) matter here:
// the agent's status writes must not wake the controller. A Domain's
// change wakes the Tunnels that reference it.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &tunav1.Tunnel{}, domainRefIndex, func(o client.Object) []string {
		if ref := o.(*tunav1.Tunnel).Spec.DomainRef; ref != nil {
			return []string{ref.Name}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("indexing Tunnels by Domain: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("tunnel-key").
		For(&tunav1.Tunnel{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&tunav1.Domain{}, handler.EnqueueRequestsFromMapFunc(r.tunnelsOfDomain)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Workers}).
		Complete(&base.Reconciler[*tunav1.Tunnel]{
			Client: r.Client, New: func() *tunav1.Tunnel { return &tunav1.Tunnel{} },
			Finalizer: tunav1.FinalizerTunnelKey, Finalize: r.finalize, Converge: r.converge, Gone: r.gone,
		})
}

func (r *Reconciler) tunnelsOfDomain(ctx context.Context, o client.Object) []reconcile.Request {
	var list tunav1.TunnelList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{domainRefIndex: o.GetName()}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, t := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&t)})
	}
	return reqs
}

// gone revokes what a deleted Tunnel may still hold on the edge: its
// finalizer normally did that, but an apiserver can let a Tunnel go with a
// finalizer added while its deletion was in flight, after which this
// reconciler may still have issued its key (kubernetes/kubernetes#77988),
// and a user can remove the finalizer by hand.
func (r *Reconciler) gone(ctx context.Context, key types.NamespacedName) error {
	if r.Sweep == nil {
		return nil
	}
	n, err := r.Sweep(ctx, key)
	if err != nil {
		return fmt.Errorf("revoking the keys of deleted Tunnel %s: %w", key, err)
	}
	if n > 0 {
		log.FromContext(ctx).Info("revoked the keys of a Tunnel that went without its finalizer", "count", n)
	}
	return nil
}
