package gateway

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// all wakes the one request.
var all = handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
	return []reconcile.Request{Request}
})

// SetupWithManager registers the reconciler: any change of a Gateway API
// object, Domain or TCPEndpoint wakes the one request (TCPRoutes from
// ServeTCPRoutes on).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	ctl, err := ctrl.NewControllerManagedBy(mgr).
		Named("gateway-status").
		Watches(&gwv1.GatewayClass{}, all).
		Watches(&gwv1.Gateway{}, all).
		Watches(&gwv1.HTTPRoute{}, all).
		Watches(&gwv1.ReferenceGrant{}, all).
		Watches(&tunav1.Domain{}, all).
		Watches(&tunav1.TCPEndpoint{}, all).
		Build(r)
	r.ctl = ctl
	return err
}

// ServeTCPRoutes serves TCPRoutes too; call it once, after
// SetupWithManager, when the API server serves TCPRoute (before or after
// the manager started).
func (r *Reconciler) ServeTCPRoutes(mgr ctrl.Manager) error {
	// On before the watch, whose first list wakes the request for the
	// routes that exist.
	r.servesTCP.Store(true)
	if err := r.ctl.Watch(source.Kind(mgr.GetCache(), client.Object(&gwv1.TCPRoute{}), all)); err != nil {
		return fmt.Errorf("watching TCPRoutes: %w", err)
	}
	return nil
}
