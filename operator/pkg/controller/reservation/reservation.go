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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// Release reports whether deleting the resource releases the reservation:
// never for an adopted one (R12), and only with reclaimPolicy Delete (R13).
func Release(adopted bool, policy tunav1.ReclaimPolicy) bool {
	return !adopted && policy != tunav1.ReclaimRetain
}

// Resync is how often a reservation is re-read to notice that it was
// deleted on the edge (R14); default one minute, jittered, so the
// reservations made together (an install, a restart) come due apart.
func Resync(d time.Duration) time.Duration {
	if d > 0 {
		return edgeapi.Jitter(d)
	}
	return edgeapi.Jitter(time.Minute)
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
	err := status.Apply(ctx, c, tunav1.GroupVersion.WithKind(kind), client.ObjectKeyFromObject(obj), status.ControllerFieldOwner,
		status.Fields{Conditions: []metav1.Condition{cond}, Values: values})
	if err != nil {
		return err
	}
	if transitions.Changed(obj, old, cond) {
		typ := corev1.EventTypeNormal
		if cond.Status != metav1.ConditionTrue {
			typ = corev1.EventTypeWarning
		}
		rec.Eventf(obj, nil, typ, cond.Reason, "Reserve", "%s", cond.Message)
	}
	return nil
}

// Failed records an edge failure on Ready and returns the retry (see
// edgeapi.Failure): a transient failure shows Ready=Unknown and backs off,
// keeping the reservation as it was; an address another owner holds is
// looked at again after recheck, the reconciler's resync (its owner may
// release or share it); the other refusals show Ready=False and wait for a
// spec change. clusterID turns edge owners into namespace names.
func Failed(ctx context.Context, c client.Client, rec recorder.EventRecorder, obj client.Object, kind string,
	existing []metav1.Condition, generation int64, clusterID string, recheck time.Duration, err error) (reconcile.Result, error) {
	f := edgeapi.Classify(err, tunav1.ReasonReservationFailed)
	if m, ok := edgeapi.Owned(err, clusterID, obj.GetNamespace()); ok {
		// Sharing lets this namespace publish on the address, never manage it.
		f.Reason = tunav1.ReasonAddressOwned
		f.Message = fmt.Sprintf("%s. A %s never takes over another owner's address (sharing lets a namespace publish on it, never "+
			"manage it): give this %s another address, or delete it, which releases nothing of the owner's", m, kind, kind)
		if werr := setReady(ctx, c, rec, obj, kind, existing, generation, f.Status(), f.Reason, f.Message); werr != nil {
			return reconcile.Result{}, werr
		}
		return reconcile.Result{RequeueAfter: recheck}, nil
	}
	if werr := setReady(ctx, c, rec, obj, kind, existing, generation, f.Status(), f.Reason, f.Message); werr != nil {
		return reconcile.Result{}, werr
	}
	if !f.Transient {
		log.FromContext(ctx).Info("the edge refused the reservation; waiting for a spec change", "error", err.Error())
	}
	return f.Result()
}

// setReady writes Ready unless it already says the same. The status values
// the object has are applied again: server-side apply removes the fields a
// manager owned and leaves out, and a failure must not wipe what was
// reserved (status.port or status.fqdn decide adoption and release).
func setReady(ctx context.Context, c client.Client, rec recorder.EventRecorder, obj client.Object, kind string,
	existing []metav1.Condition, generation int64, st metav1.ConditionStatus, reason, msg string) error {
	cond := status.Condition(existing, tunav1.ConditionReady, st, reason, msg, generation)
	if status.Same(status.Find(existing, tunav1.ConditionReady), cond) {
		return nil
	}
	values, err := statusValues(obj)
	if err != nil {
		return err
	}
	values["observedGeneration"] = generation
	return WriteStatus(ctx, c, rec, obj, kind, existing, cond, values)
}

// statusValues are the status fields of obj other than conditions.
func statusValues(obj client.Object) (map[string]any, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("reading the status of %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	values := map[string]any{}
	st, _ := u["status"].(map[string]any)
	for k, v := range st {
		if k != "conditions" {
			values[k] = v
		}
	}
	return values, nil
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

// Existing decides what a reservation found on the edge is to obj, a
// resource whose namespace is owner on the edge, and reports whether it
// is adopted:
//
//   - another owner's is refused (Foreign): never adopted;
//   - owner's own is taken back, not adopted, whatever obj's status says:
//     this namespace made it (this resource, an earlier one of the name
//     whose reclaimPolicy Retain kept it, or a cluster rebuilt with the
//     same cluster id), so the reclaimPolicy the user wrote applies;
//   - an unowned one (made by hand) is adopted (R12) unless obj's status
//     recorded it as obj's own, decided on a fresh read (AdoptedLive):
//     operators before owners existed reserved without one.
func Existing[T client.Object](ctx context.Context, reader client.Reader, obj T, address string, have apiwire.Sharing, owner string,
	recorded func(T) bool, adopted func(T) bool) (bool, error) {
	if err := Foreign(address, have, owner); err != nil {
		return false, err
	}
	if have.Owner == owner {
		return false, nil
	}
	if adopted(obj) || recorded(obj) {
		return adopted(obj), nil
	}
	return AdoptedLive(ctx, reader, obj, recorded, adopted)
}

// Take takes a reservation found on the edge, have, for obj (Existing
// decides: refused, adopted or the namespace's own) and, when it is the
// namespace's own, keeps its shared_with equal to want through share.
// sharing reads have's owner and shared_with.
func Take[T client.Object, R any](ctx context.Context, reader client.Reader, obj T, address string, have *R, sharing func(*R) apiwire.Sharing,
	owner string, want []string, recorded, adopted func(T) bool,
	share func(ctx context.Context, address, owner string, sharedWith []string) (*R, error)) (*R, bool, error) {
	s := sharing(have)
	took, err := Existing(ctx, reader, obj, address, s, owner, recorded, adopted)
	if err != nil {
		return nil, false, err
	}
	if s.Owner == owner && SharingChanged(s.SharedWith, want) {
		if have, err = share(ctx, address, owner, want); err != nil {
			return nil, false, err
		}
	}
	return have, took, nil
}

// Foreign refuses to adopt a reservation another owner made: adopting it
// would hand this namespace an address another namespace (or cluster)
// reserved. Sharing lets others use an address, never manage it.
func Foreign(address string, have apiwire.Sharing, owner string) error {
	if have.Owner == "" || have.Owner == owner {
		return nil
	}
	return &apiwire.APIError{Status: http.StatusForbidden, Code: apiwire.CodeAddressOwned, Owner: have.Owner, Address: address,
		Message: fmt.Sprintf("%s is reserved on the edge by owner %s", address, have.Owner)}
}

// SharingChanged reports whether the edge's shared_with differs from want
// (both are sets).
func SharingChanged(have, want []string) bool {
	return !slices.Equal(slices.Compact(slices.Sorted(slices.Values(have))), slices.Compact(slices.Sorted(slices.Values(want))))
}

// DNSTarget is the host name that a DNS record for host should point at,
// as status.loadBalancer shows it (Ingress hosts, LoadBalancer Service
// ports): the CNAME target of a custom domain, so that external-dns
// creates the very record the domain needs; the host itself for a
// subdomain of the base domain.
func DNSTarget(host string, custom bool, records []tunav1.DNSRecord) string {
	if custom {
		for _, rec := range records {
			if rec.Type == "CNAME" && rec.Value != "" {
				return rec.Value
			}
		}
	}
	return host
}

// Forget drops what this package remembers of the resource key, once it is
// gone: the last Ready it wrote, which de-duplicates its events.
func Forget(key types.NamespacedName) { transitions.Forget(key) }

// Remembered is how many resources this package remembers a Ready of.
func Remembered() int { return transitions.Len() }
