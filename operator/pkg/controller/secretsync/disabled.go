package secretsync

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// Disabled answers SecretSyncs when the controller runs without secret
// sync: each shows Ready=False (SyncDisabled) instead of no status at all,
// and one left with a finalizer from when sync was on can still be deleted
// (its Secret is left as it is: this controller has no access to it).
type Disabled struct {
	Client   client.Client
	Recorder recorder.EventRecorder
}

// SetupWithManager registers it.
func (d *Disabled) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("secret-sync").
		For(&tunav1.SecretSync{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(d)
}

// Reconcile implements reconcile.Reconciler.
func (d *Disabled) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var ss tunav1.SecretSync
	if err := d.Client.Get(ctx, req.NamespacedName, &ss); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !ss.DeletionTimestamp.IsZero() {
		if controllerutil.RemoveFinalizer(&ss, tunav1.FinalizerSecretSync) {
			if err := d.Client.Update(ctx, &ss); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, fmt.Errorf("removing finalizer: %w", err)
			}
		}
		return reconcile.Result{}, nil
	}
	msg := "this operator was installed without SecretSync (chart: secretSync.enabled=false), so nothing is synced: ask its administrator to enable it"
	cond := status.Condition(ss.Status.Conditions, tunav1.ConditionReady, metav1.ConditionFalse, tunav1.ReasonSyncDisabled, msg, ss.Generation)
	if status.Same(status.Find(ss.Status.Conditions, tunav1.ConditionReady), cond) {
		return reconcile.Result{}, nil
	}
	err := status.Apply(ctx, d.Client, tunav1.GroupVersion.WithKind("SecretSync"), req.NamespacedName, status.SecretSyncFieldOwner,
		status.Fields{Conditions: []metav1.Condition{cond}, Values: map[string]any{"observedGeneration": ss.Generation}})
	if err != nil {
		return reconcile.Result{}, err
	}
	d.Recorder.Eventf(&ss, nil, corev1.EventTypeWarning, tunav1.ReasonSyncDisabled, "Sync", "%s", msg)
	return reconcile.Result{}, nil
}
