// Package reservation holds what the Domain and TCPEndpoint reconcilers
// share: the reclaim rule, status writing with transition events, and the
// mapping of edge failures to Ready and to a retry.
package reservation

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	edgeclient "code.tuna.am/tuna/k8s-operator/edge/client"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// FieldOwner is the controller's field manager for reservation status.
const FieldOwner = "tuna-controller"

// Release reports whether deleting the resource releases the reservation:
// never for an adopted one (R12), and only with reclaimPolicy Delete (R13).
func Release(adopted bool, policy tunav1.ReclaimPolicy) bool {
	return !adopted && policy != tunav1.ReclaimRetain
}

// Resync is how often a reservation is re-read to notice that it was
// deleted on the edge (R14); default one minute.
func Resync(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return time.Minute
}

// WriteStatus applies Ready and the other status values of obj, and records
// an event when Ready changes status or reason.
func WriteStatus(ctx context.Context, c client.Client, rec recorder.EventRecorder, obj client.Object, kind string,
	existing []metav1.Condition, cond metav1.Condition, values map[string]any) error {
	return writeStatus(ctx, c, rec, obj, kind, existing, cond, values)
}

// transitions de-duplicates Ready events of reservations across reconciles.
var transitions status.Transitions

func writeStatus(ctx context.Context, c client.Client, rec recorder.EventRecorder, obj client.Object, kind string,
	existing []metav1.Condition, cond metav1.Condition, values map[string]any) error {
	old := status.Find(existing, tunav1.ConditionReady)
	err := status.Apply(ctx, c, tunav1.GroupVersion.WithKind(kind), client.ObjectKeyFromObject(obj), FieldOwner,
		status.Fields{Conditions: []metav1.Condition{cond}, Values: values})
	if err != nil {
		return err
	}
	if transitions.Changed(obj.GetUID(), old, cond) {
		typ := corev1.EventTypeNormal
		if cond.Status != metav1.ConditionTrue {
			typ = corev1.EventTypeWarning
		}
		rec.Eventf(obj, nil, typ, cond.Reason, "Reserve", "%s", cond.Message)
	}
	return nil
}

// Failed records an edge failure on Ready and returns the retry: transient
// failures back off, an address another owner holds is looked at again
// after a resync (its owner may release or share it), and the others wait
// for a spec change. clusterID turns edge owners into namespace names.
func Failed(ctx context.Context, c client.Client, rec recorder.EventRecorder, obj client.Object, kind string,
	existing []metav1.Condition, generation int64, clusterID string, err error) (reconcile.Result, error) {
	transient, after, retErr := edgeapi.Outcome(err)
	reason, msg := tunav1.ReasonReservationFailed, "the edge API failed: "+edgeapi.Message(err)
	if transient {
		reason = tunav1.ReasonEdgeUnreachable
	}
	if code := edgeapi.Code(err); code == "name_taken" {
		reason = tunav1.ReasonAddressTaken
	}
	if m, ok := edgeapi.Owned(err, clusterID, obj.GetNamespace()); ok {
		// Sharing lets this namespace publish on the address, never manage it.
		reason, after = tunav1.ReasonAddressOwned, Resync(0)
		msg = fmt.Sprintf("%s; this %s cannot take the reservation over, since only the owner's namespace manages it: delete this %s",
			m, kind, kind)
	}
	cond := status.Condition(existing, tunav1.ConditionReady, metav1.ConditionFalse, reason, msg, generation)
	if !status.Same(status.Find(existing, tunav1.ConditionReady), cond) {
		if werr := WriteStatus(ctx, c, rec, obj, kind, existing, cond, map[string]any{"observedGeneration": generation}); werr != nil {
			return reconcile.Result{}, werr
		}
	}
	if !transient {
		log.FromContext(ctx).Info("the edge refused the reservation; waiting for a spec change", "error", err.Error())
	}
	return reconcile.Result{RequeueAfter: after}, retErr
}

// AdoptedLive decides whether an existing reservation is adopted, on a
// fresh read of obj from the API server (not the cache): a reservation the
// resource's status has not recorded is adopted; a recorded one keeps the
// adopted flag the status holds. A cache lagging behind our own status
// write must flip neither: it would make our reservation undeletable, or an
// adopted one deletable.
func AdoptedLive[T client.Object](ctx context.Context, reader client.Reader, obj T, recorded func(T) bool, adopted func(T) bool) (bool, error) {
	fresh := obj.DeepCopyObject().(T)
	if err := reader.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
		return false, fmt.Errorf("re-reading %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	return !recorded(fresh) || adopted(fresh), nil
}

// Fresh re-reads obj from the API server. Finalizers decide on fresh
// status: releasing a reservation cannot be undone.
func Fresh[T client.Object](ctx context.Context, reader client.Reader, obj T) (T, error) {
	fresh := obj.DeepCopyObject().(T)
	if err := reader.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
		return fresh, fmt.Errorf("re-reading %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	return fresh, nil
}

// Foreign refuses to adopt a reservation another owner made: adopting it
// would hand this namespace an address another namespace (or cluster)
// reserved. Sharing lets others use an address, never manage it.
func Foreign(address string, have edgeclient.Sharing, owner string) error {
	if have.Owner == "" || have.Owner == owner {
		return nil
	}
	return &edgeclient.APIError{Status: http.StatusForbidden, Code: edgeclient.CodeAddressOwned, Owner: have.Owner, Address: address,
		Message: fmt.Sprintf("%s is reserved on the edge by owner %s", address, have.Owner)}
}

// SharingChanged reports whether the edge's shared_with differs from want
// (both are sets).
func SharingChanged(have, want []string) bool {
	return !slices.Equal(slices.Compact(slices.Sorted(slices.Values(have))), slices.Compact(slices.Sorted(slices.Values(want))))
}
