package ingress

import (
	"context"
	"maps"

	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

// Handler maps Ingress events to the hosts they concern: the hosts of the
// object before and after the change, if this controller's classes claim
// it. With alsoIngress, the Ingress's own request is enqueued too.
func Handler(reader client.Reader, alsoIngress bool) handler.EventHandler {
	enqueue := func(ctx context.Context, q pubhost.Queue, objs ...client.Object) {
		c, err := ReadClasses(ctx, reader)
		if err != nil {
			return
		}
		reqs := map[reconcile.Request]bool{}
		for _, o := range objs {
			ing, ok := o.(*networkingv1.Ingress)
			if !ok || ing == nil || !c.Claims(ing) {
				continue
			}
			for _, h := range Hosts(ing) {
				reqs[pubhost.Request(h)] = true
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
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q pubhost.Queue) { enqueue(ctx, q, e.Object) },
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q pubhost.Queue) {
			enqueue(ctx, q, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q pubhost.Queue) { enqueue(ctx, q, e.Object) },
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q pubhost.Queue) {
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
				reqs[pubhost.Request(h)] = true
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
