package reservation

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// Ensuring is what one reservation kind tells Ensure: how to read, make
// and share it on the edge, and what obj's status recorded of it.
type Ensuring[T client.Object, R any] struct {
	// Address is the reservation's name on the edge (a domain, an alias);
	// What names it in events ("domain a.example.com").
	Address, What string
	// Owner is obj's namespace as an owner on the edge; SharedWith the
	// owners spec.sharedWith asks for.
	Owner      string
	SharedWith []string
	// Recorded reports whether obj's status holds this reservation;
	// Adopted whether it says the reservation is adopted.
	Recorded, Adopted func(T) bool
	// Get and Create read and make the reservation; Create makes it with
	// Owner and SharedWith.
	Get    func(ctx context.Context, address string) (*R, error)
	Create func(ctx context.Context) (*R, error)
	// Sharing reads a reservation's owner and shared_with; Share sets its
	// shared_with, acting for owner.
	Sharing func(*R) apiwire.Sharing
	Share   func(ctx context.Context, address, owner string, sharedWith []string) (*R, error)
}

// Ensure finds or makes obj's reservation and reports whether it is
// adopted. One that exists is taken (Take: this namespace's own, adopted
// when unowned (R12), refused when another owner's); one that obj's
// status recorded but that is gone on the edge is made again (R14), with
// a warning event; one reserved meanwhile by someone else (name_taken) is
// read and taken as if it had been found.
func Ensure[T client.Object, R any](ctx context.Context, reader client.Reader, rec recorder.EventRecorder, obj T, x Ensuring[T, R]) (*R, bool, error) {
	take := func(have *R) (*R, bool, error) {
		return Take(ctx, reader, obj, x.Address, have, x.Sharing, x.Owner, x.SharedWith, x.Recorded, x.Adopted, x.Share)
	}
	existing, err := x.Get(ctx, x.Address)
	switch {
	case err == nil:
		return take(existing)
	case !apiwire.IsNotFound(err):
		return nil, false, err
	}
	if x.Recorded(obj) {
		log.FromContext(ctx).Info("reservation is gone on the edge, re-creating it", "reservation", x.What)
		rec.Eventf(obj, nil, corev1.EventTypeWarning, "ReservationRecreated", "Reserve", "%s was deleted on the edge; reserved it again", x.What)
	}
	created, err := x.Create(ctx)
	if apiwire.IsNameTaken(err) {
		// Reserved meanwhile on the account (by hand or another cluster).
		if existing, err = x.Get(ctx, x.Address); err != nil {
			return nil, false, err
		}
		return take(existing)
	}
	// Made with this namespace as owner: not adopted, whatever was before.
	return created, false, err
}
