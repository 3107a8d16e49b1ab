package ingress

import (
	"context"
	"maps"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// HostRequest is the reconcile request of an Ingress host. Its namespace is
// empty, which no Ingress has, so one controller can take both host and
// Ingress requests.
func HostRequest(host string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Name: host}}
}

// IsHostRequest reports whether req names a host (else an Ingress).
func IsHostRequest(req reconcile.Request) bool { return req.Namespace == "" }

// Queue is the work queue of a controller with host and Ingress requests.
type Queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// Handler maps Ingress events to the hosts they concern: the hosts of the
// object before and after the change, if this controller's classes claim
// it. With alsoIngress, the Ingress's own request is enqueued too.
func Handler(reader client.Reader, alsoIngress bool) handler.EventHandler {
	enqueue := func(ctx context.Context, q Queue, objs ...client.Object) {
		var classes networkingv1.IngressClassList
		if err := reader.List(ctx, &classes); err != nil {
			return
		}
		c := NewClasses(classes.Items)
		reqs := map[reconcile.Request]bool{}
		for _, o := range objs {
			ing, ok := o.(*networkingv1.Ingress)
			if !ok || ing == nil || !c.Claims(ing) {
				continue
			}
			for _, h := range Hosts(ing) {
				reqs[HostRequest(h)] = true
			}
			if alsoIngress {
				reqs[reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ing)}] = true
			}
		}
		for r := range maps.Keys(reqs) {
			q.Add(r)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q Queue) { enqueue(ctx, q, e.Object) },
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q Queue) { enqueue(ctx, q, e.ObjectOld, e.ObjectNew) },
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q Queue) { enqueue(ctx, q, e.Object) },
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q Queue) {
			enqueue(ctx, q, e.Object)
		},
	}
}

// ClassHandler maps IngressClass events to the hosts (and, with
// alsoIngress, the Ingresses) of every Ingress that names that class or no
// class at all: a class appearing, going or becoming the default changes
// what is served.
func ClassHandler(reader client.Reader, alsoIngress bool) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var list networkingv1.IngressList
		if err := reader.List(ctx, &list); err != nil {
			return nil
		}
		reqs := map[reconcile.Request]bool{}
		for i := range list.Items {
			ing := &list.Items[i]
			if !MayClaim(ing, o.GetName()) {
				continue
			}
			for _, h := range Hosts(ing) {
				reqs[HostRequest(h)] = true
			}
			if alsoIngress {
				reqs[reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ing)}] = true
			}
		}
		return slicesOf(reqs)
	})
}

func slicesOf(m map[reconcile.Request]bool) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(m))
	for r := range m {
		out = append(out, r)
	}
	return out
}

// Changed lets through the Ingress updates that can change what is served:
// spec (generation), annotations (the legacy class annotation) and
// deletion; status writes (ours) are ignored.
var Changed = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return o.GetGeneration() != n.GetGeneration() ||
			!maps.Equal(o.GetAnnotations(), n.GetAnnotations()) ||
			o.GetDeletionTimestamp().IsZero() != n.GetDeletionTimestamp().IsZero()
	},
}
