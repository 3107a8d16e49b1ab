package loadbalancer

import (
	"context"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// CacheFilter keeps only Services of type LoadBalancer in the controller's
// cache: a cluster has far more Services than load balancers, and the
// controller needs no other. A Service whose type changes away leaves the
// cache as a delete event, and its reconcile reads it from the API server.
func CacheFilter(o *cache.Options) {
	if o.ByObject == nil {
		o.ByObject = map[client.Object]cache.ByObject{}
	}
	o.ByObject[&corev1.Service{}] = cache.ByObject{Field: fields.OneTermEqualSelector("spec.type", string(corev1.ServiceTypeLoadBalancer))}
}

// SetupWithManager registers the reconciler. A Service wakes it when its
// spec, annotations, finalizers or deletion change (not on its own status
// writes); its Tunnels and TCPEndpoints when their status changes; the
// Domains and TCPEndpoints its annotations may name when they change.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("loadbalancer").
		For(&corev1.Service{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*corev1.Service), e.ObjectNew.(*corev1.Service)
			return !reflect.DeepEqual(o.Spec, n.Spec) || !reflect.DeepEqual(o.Annotations, n.Annotations) ||
				!reflect.DeepEqual(o.Finalizers, n.Finalizers) || !o.DeletionTimestamp.Equal(n.DeletionTimestamp)
		}})).
		Owns(&tunav1.Tunnel{}).
		Owns(&tunav1.TCPEndpoint{}).
		Watches(&tunav1.Domain{}, handler.EnqueueRequestsFromMapFunc(r.annotated(tunav1.AnnotationDomain))).
		Watches(&tunav1.TCPEndpoint{}, handler.EnqueueRequestsFromMapFunc(r.annotated(tunav1.AnnotationTCPEndpoint))).
		Complete(r)
}

// annotated maps an object to the LoadBalancer Services that carry the
// annotation (which may name it; a TCPEndpoint may be named from another
// namespace it is shared with).
func (r *Reconciler) annotated(annotation string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var list corev1.ServiceList
		if err := r.Client.List(ctx, &list); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for i := range list.Items {
			if _, ok := list.Items[i].Annotations[annotation]; ok {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
		}
		return reqs
	}
}
