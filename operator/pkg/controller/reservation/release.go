package reservation

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// Releasing is what the finalizer of one Domain or TCPEndpoint knows.
type Releasing struct {
	// Kind is the resource's kind; What names the reservation ("domain
	// a.example.com") and Address is its name on the edge.
	Kind, What, Address string
	// ClusterID makes the resource's namespace an owner on the edge
	// (edgeapi.Owner). The release acts for that owner, so the edge
	// refuses to release an address another owner holds.
	ClusterID string
	// Release is the reclaim rule's answer (Release): false for an adopted
	// or retained reservation.
	Release bool
	// Recheck is how often a release the edge refused is tried again.
	Recheck time.Duration
	// Delete releases address on the edge, acting for owner.
	Delete func(ctx context.Context, address, owner string) error
}

// Finalize settles the reservation of obj, being deleted: it releases it
// when the reclaim rule says so, and never one that belongs to another
// owner. A resource refused with AddressOwned never held its address, so
// its finalizer just goes, with an event that says so; the same goes when
// the edge refuses the release because the address now belongs to another
// owner (deleted on the edge and reserved again by someone else since the
// resource last looked).
func Finalize(ctx context.Context, c client.Client, rec recorder.EventRecorder, obj client.Object,
	existing []metav1.Condition, generation int64, x Releasing) (reconcile.Result, error) {
	if ready := status.Find(existing, tunav1.ConditionReady); ready != nil && ready.Reason == tunav1.ReasonAddressOwned {
		skipped(rec, obj, x, ready.Message)
		return reconcile.Result{}, nil
	}
	if !x.Release || x.Address == "" {
		return reconcile.Result{}, nil
	}
	err := x.Delete(ctx, x.Address, edgeapi.Owner(x.ClusterID, obj.GetNamespace()))
	if m, owned := edgeapi.Owned(err, x.ClusterID, obj.GetNamespace()); owned {
		skipped(rec, obj, x, m)
		return reconcile.Result{}, nil
	}
	if err != nil && !apiwire.IsNotFound(err) {
		return ReleaseFailed(ctx, c, rec, obj, x.Kind, existing, generation, x.What, x.Recheck, err)
	}
	log.FromContext(ctx).Info("released the reservation", "reservation", x.What)
	return reconcile.Result{}, nil
}

// skipped records that obj goes without releasing a reservation another
// owner holds; why is the refusal's message, whose first clause names the
// owner.
func skipped(rec recorder.EventRecorder, obj client.Object, x Releasing, why string) {
	why, _, _ = strings.Cut(why, ";")
	rec.Eventf(obj, nil, corev1.EventTypeNormal, tunav1.ReasonReleaseSkipped, "Release",
		"the %s goes without releasing %s, which is not its namespace's (%s): the reservation stays with its owner", x.Kind, x.What, why)
}

// ReleaseFailed handles a finalizer whose release the edge did not do. The
// finalizer stays (a zero Result and no error would drop it and leak the
// reservation on the edge), unless the object carries the force-release
// annotation. what names the reservation ("domain a.example.com"); recheck
// is how often a refused release is tried again: what unblocks it (a new
// operator API key, a fix on the edge) changes no spec.
func ReleaseFailed(ctx context.Context, c client.Client, rec recorder.EventRecorder, obj client.Object, kind string,
	existing []metav1.Condition, generation int64, what string, recheck time.Duration, err error) (reconcile.Result, error) {
	f := edgeapi.Classify(err, tunav1.ReasonReleaseBlocked)
	f.Err = fmt.Errorf("releasing %s: %w", what, err)
	if Forced(obj) {
		log.FromContext(ctx).Info("release failed; the finalizer is removed as the force-release annotation asks", "reservation", what, "error", err.Error())
		rec.Eventf(obj, nil, corev1.EventTypeWarning, tunav1.ReasonReleaseForced, "Release",
			"%s was not released (%s) and may remain on the edge account: the annotation %s let the %s go; delete it on the edge if it is not wanted",
			what, f.Message, tunav1.AnnotationForceRelease, kind)
		return reconcile.Result{}, nil
	}
	unblock := fmt.Sprintf("the finalizer stays so that %s does not leak; once the cause is fixed it is released, or release it on the edge by hand and run `kubectl annotate %s %s -n %s %s=true` to let the %s go",
		what, strings.ToLower(kind), obj.GetName(), obj.GetNamespace(), tunav1.AnnotationForceRelease, kind)
	reason := tunav1.ReasonReleaseBlocked
	if f.Transient {
		reason = tunav1.ReasonEdgeUnreachable
	}
	msg := "releasing " + what + ": " + f.Message + "; " + unblock
	if werr := setReady(ctx, c, rec, obj, kind, existing, generation, f.Status(), reason, msg); werr != nil {
		return reconcile.Result{}, werr
	}
	if f.Transient {
		return f.Result()
	}
	log.FromContext(ctx).Info("the edge refused to release the reservation; the finalizer stays", "reservation", what, "error", err.Error())
	return reconcile.Result{RequeueAfter: recheck}, nil
}

// Forced reports whether obj carries the force-release annotation.
func Forced(obj client.Object) bool {
	return obj.GetAnnotations()[tunav1.AnnotationForceRelease] == "true"
}
