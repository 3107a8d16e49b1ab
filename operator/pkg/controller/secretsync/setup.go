package secretsync

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/base"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/metrics"
)

// SetupWithManager registers the reconciler: spec changes and deletion
// wake it (not its own status writes), and so do the Hub's change notices.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("secret-sync").
		For(&tunav1.SecretSync{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(r.Hub.Events, &handler.EnqueueRequestForObject{})).
		Complete(&base.Reconciler[*tunav1.SecretSync]{
			Client: r.Client, New: func() *tunav1.SecretSync { return &tunav1.SecretSync{} },
			Finalizer: tunav1.FinalizerSecretSync, Finalize: r.finalize, Converge: r.converge, Gone: r.gone,
		})
}

// gone stops the Hub's long poll for, and drops the metrics of, a
// SecretSync that went without its finalizer (removed by hand, or skipped
// by the apiserver: kubernetes/kubernetes#77988); otherwise the poll would
// run until the controller restarts. The target Secret carries the
// SecretSync's owner reference, so the garbage collector deletes it, even
// under deletionPolicy Retain, which only the finalizer can honour.
func (r *Reconciler) gone(_ context.Context, key types.NamespacedName) error {
	r.Hub.Unsubscribe(key)
	metrics.ForgetSecretSync(key.Namespace, key.Name)
	transitions.Forget(key)
	return nil
}

// finalize applies spec.deletionPolicy to the target Secret, if this
// SecretSync controls it: Delete deletes it, Retain leaves it with its data
// and without the owner reference (so no garbage collector takes it later).
// A Secret the SecretSync does not control is never touched.
func (r *Reconciler) finalize(ctx context.Context, ss *tunav1.SecretSync) (reconcile.Result, error) {
	key := client.ObjectKeyFromObject(ss)
	r.Hub.Unsubscribe(key)
	metrics.ForgetSecretSync(ss.Namespace, ss.Name)
	transitions.Forget(key)
	name := targetName(ss)
	m, err := r.targetMeta(ctx, ss.Namespace, name)
	if err != nil || m == nil || !ownedBy(m, ss) {
		return reconcile.Result{}, err
	}
	if ss.Spec.DeletionPolicy == tunav1.DeletionRetain {
		return reconcile.Result{}, r.orphan(ctx, m, ss)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ss.Namespace, Name: name}}
	err = r.Client.Delete(ctx, s, client.Preconditions{UID: &m.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("deleting Secret %s/%s (deletionPolicy Delete): %w", ss.Namespace, name, err)
	}
	log.FromContext(ctx).Info("deleted the synced Secret", "secret", name)
	return reconcile.Result{}, nil
}

// orphan drops this SecretSync's owner reference from the Secret with a
// JSON patch guarded by the Secret's UID and resourceVersion, so the data
// stays exactly as last synced.
func (r *Reconciler) orphan(ctx context.Context, m *metav1.PartialObjectMetadata, ss *tunav1.SecretSync) error {
	var keep []metav1.OwnerReference
	for _, o := range m.OwnerReferences {
		if o.UID != ss.UID {
			keep = append(keep, o)
		}
	}
	refs, err := json.Marshal(keep) // null (none left) removes the field
	if err != nil {
		return err
	}
	patch := fmt.Appendf(nil, `{"metadata":{"uid":%q,"resourceVersion":%q,"ownerReferences":%s}}`, m.UID, m.ResourceVersion, refs)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name}}
	if err := r.Client.Patch(ctx, s, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("releasing Secret %s/%s (deletionPolicy Retain): %w", m.Namespace, m.Name, err)
	}
	log.FromContext(ctx).Info("kept the synced Secret", "secret", m.Name)
	return nil
}
