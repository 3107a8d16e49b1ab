package tunnelkey

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// SetupWithManager registers the reconciler. Only spec changes (and
// deletion, which bumps the generation of custom resources) matter here:
// the agent's status writes must not wake the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("tunnel-key").
		For(&tunav1.Tunnel{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}
