// Package tcpendpoint reconciles TCPEndpoint resources with reserved public
// TCP ports on the edge: an alias maps to a port that stays the same across
// restarts of the edge and of the operator.
package tcpendpoint

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/base"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/reservation"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// Reconciler keeps a TCPEndpoint's reservation on the edge.
type Reconciler struct {
	Client client.Client
	// Reader reads uncached, to decide adoption on fresh status.
	Reader   client.Reader
	Edge     edgeapi.Reservations
	Recorder recorder.EventRecorder
	// ClusterID makes the owner of every reservation: "<cluster-id>/<namespace>".
	ClusterID string
	// Resync re-reads the reservation to notice one deleted on the edge.
	Resync time.Duration

	held reservation.Ledger
}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("tcpendpoint").For(&tunav1.TCPEndpoint{}).Complete(&base.Reconciler[*tunav1.TCPEndpoint]{
		Client: r.Client, New: func() *tunav1.TCPEndpoint { return &tunav1.TCPEndpoint{} },
		Finalizer: tunav1.FinalizerReservation, Finalize: r.finalize, Converge: r.converge, Gone: r.gone,
	})
}

// converge keeps one TCPEndpoint's reservation and status.
func (r *Reconciler) converge(ctx context.Context, e *tunav1.TCPEndpoint) (reconcile.Result, error) {
	ep, adopted, err := r.ensure(ctx, e)
	if err != nil {
		return reservation.Failed(ctx, r.Client, r.Recorder, e, "TCPEndpoint", e.Status.Conditions, e.Generation, r.ClusterID, reservation.Resync(r.Resync), err)
	}
	r.held.Hold(client.ObjectKeyFromObject(e), reservation.Held{UID: e.UID, Address: ep.Alias,
		Release: reservation.Release(adopted, e.Spec.ReclaimPolicy)})
	reason, msg := tunav1.ReasonReserved, fmt.Sprintf("port %d is reserved for alias %s: %s", ep.Port, ep.Alias, ep.Address)
	if adopted {
		reason, msg = tunav1.ReasonAdopted, fmt.Sprintf("alias %s (port %d) already existed on the account and is adopted; the operator will never delete it", ep.Alias, ep.Port)
	}
	cond := status.Condition(e.Status.Conditions, tunav1.ConditionReady, metav1.ConditionTrue, reason, msg, e.Generation)
	current := status.Same(status.Find(e.Status.Conditions, tunav1.ConditionReady), cond) && e.Status.Port == int32(ep.Port) &&
		e.Status.Address == ep.Address && e.Status.Adopted == adopted && e.Status.ObservedGeneration == e.Generation
	if !current {
		err = reservation.WriteStatus(ctx, r.Client, r.Recorder, e, "TCPEndpoint", e.Status.Conditions, cond, map[string]any{
			"port": int64(ep.Port), "address": ep.Address, "adopted": adopted, "observedGeneration": e.Generation,
		})
		if err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{RequeueAfter: reservation.Resync(r.Resync)}, nil
}

// ensure finds or makes the reservation (reservation.Ensure): the
// TCPEndpoint's status recorded it when it holds a port.
func (r *Reconciler) ensure(ctx context.Context, e *tunav1.TCPEndpoint) (*apiwire.TCPEndpoint, bool, error) {
	alias := e.Spec.Alias
	owner := edgeapi.Owner(r.ClusterID, e.Namespace)
	shared := edgeapi.Owners(r.ClusterID, e.Spec.SharedWith)
	return reservation.Ensure(ctx, r.Reader, r.Recorder, e, reservation.Ensuring[*tunav1.TCPEndpoint, apiwire.TCPEndpoint]{
		Address: alias, What: "TCP endpoint " + alias, Owner: owner, SharedWith: shared,
		Recorded: func(x *tunav1.TCPEndpoint) bool { return x.Status.Port != 0 },
		Adopted:  func(x *tunav1.TCPEndpoint) bool { return x.Status.Adopted },
		Get:      r.Edge.GetTCPEndpoint,
		Create: func(ctx context.Context) (*apiwire.TCPEndpoint, error) {
			return r.Edge.CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: alias,
				Sharing: apiwire.Sharing{Owner: owner, SharedWith: shared}})
		},
		Sharing: func(x *apiwire.TCPEndpoint) apiwire.Sharing { return x.Sharing },
		Share:   r.Edge.ShareTCPEndpoint,
	})
}

// finalize releases the port unless it is adopted, retained, or another
// owner's (reservation.Finalize).
func (r *Reconciler) finalize(ctx context.Context, e *tunav1.TCPEndpoint) (reconcile.Result, error) {
	e, err := reservation.Fresh(ctx, r.Reader, e)
	if err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	recorded, release := e.Status.Port != 0, reservation.Release(e.Status.Adopted, e.Spec.ReclaimPolicy)
	if h, ok := r.held.Lookup(client.ObjectKeyFromObject(e), e.UID); ok && !recorded {
		// Reserved, but the status write did not land before the delete.
		recorded, release = true, h.Release
	}
	address := ""
	if recorded {
		address = e.Spec.Alias
	}
	res, err := reservation.Finalize(ctx, r.Client, r.Recorder, e, e.Status.Conditions, e.Generation, reservation.Releasing{
		Kind: "TCPEndpoint", What: "TCP endpoint " + e.Spec.Alias, Address: address, ClusterID: r.ClusterID, Release: release,
		Recheck: reservation.Resync(r.Resync), Delete: r.Edge.DeleteTCPEndpoint,
	})
	if err == nil && res.IsZero() {
		r.held.Forget(client.ObjectKeyFromObject(e))
		reservation.Forget(client.ObjectKeyFromObject(e))
	}
	return res, err
}

// gone releases the port of a TCPEndpoint that went without its
// finalizer, as the finalizer would have, unless a TCPEndpoint of the
// namespace (read live) holds or asks for the alias.
func (r *Reconciler) gone(ctx context.Context, key types.NamespacedName) error {
	reservation.Forget(key)
	return r.held.Gone(ctx, key, "TCPEndpoint", func(ctx context.Context, h reservation.Held) (bool, error) {
		var list tunav1.TCPEndpointList
		if err := r.Reader.List(ctx, &list, client.InNamespace(key.Namespace)); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.UID == h.UID || e.Spec.Alias == h.Address {
				return true, nil
			}
		}
		return false, nil
	}, func(ctx context.Context, alias string) error {
		return r.Edge.DeleteTCPEndpoint(ctx, alias, edgeapi.Owner(r.ClusterID, key.Namespace))
	})
}
