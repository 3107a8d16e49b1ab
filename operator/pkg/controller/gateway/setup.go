package gateway

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// SetupWithManager registers the reconciler: any change of a Gateway API
// object, Domain or TCPEndpoint wakes the one request.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{Request}
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("gateway-status").
		Watches(&gwv1.GatewayClass{}, all).
		Watches(&gwv1.Gateway{}, all).
		Watches(&gwv1.HTTPRoute{}, all).
		Watches(&gwv1.ReferenceGrant{}, all).
		Watches(&tunav1.Domain{}, all).
		Watches(&tunav1.TCPEndpoint{}, all)
	if r.TCPRoutes {
		b = b.Watches(&gwv1.TCPRoute{}, all)
	}
	return b.Complete(r)
}
