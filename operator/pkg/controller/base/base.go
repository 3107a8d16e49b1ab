// Package base is the skeleton every controller reconciler shares: read the
// object, run its finalizer on deletion, make sure the finalizer is there,
// then converge. Reconcilers supply only the two hooks, so the finalizer
// handling (which must never leak a reservation or a key) lives once.
package base

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Reconciler reconciles objects of type T with a finalizer.
type Reconciler[T client.Object] struct {
	Client    client.Client
	New       func() T
	Finalizer string
	// Finalize releases what the object holds. When it returns no error and
	// a zero Result, the finalizer is removed and the object may go.
	Finalize func(ctx context.Context, obj T) (reconcile.Result, error)
	// Converge makes the world match the object and writes its status.
	Converge func(ctx context.Context, obj T) (reconcile.Result, error)
	// Gone, when set, runs for an object that no longer exists: it releases
	// what the object may still hold although its finalizer did not run
	// (removed by hand, or skipped by the apiserver when it was added while
	// the deletion was in flight). It must tell a re-created object of the
	// same name from the gone one. An error retries with backoff.
	Gone func(ctx context.Context, key types.NamespacedName) error
}

// Reconcile implements reconcile.Reconciler.
func (b *Reconciler[T]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := b.New()
	if err := b.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) && b.Gone != nil {
			return reconcile.Result{}, b.Gone(ctx, req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		if !controllerutil.ContainsFinalizer(obj, b.Finalizer) {
			return reconcile.Result{}, nil
		}
		res, err := b.Finalize(ctx, obj)
		if err != nil || !res.IsZero() {
			return res, err
		}
		controllerutil.RemoveFinalizer(obj, b.Finalizer)
		if err := b.Client.Update(ctx, obj); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("removing finalizer %s: %w", b.Finalizer, err)
		}
		return reconcile.Result{}, nil
	}
	if controllerutil.AddFinalizer(obj, b.Finalizer) {
		if err := b.Client.Update(ctx, obj); err != nil {
			return reconcile.Result{}, fmt.Errorf("adding finalizer %s: %w", b.Finalizer, err)
		}
	}
	return b.Converge(ctx, obj)
}
