package gateway

import (
	"context"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

// RulesFor returns the rules of host's table (RulesOfHost) from the
// HTTPRoutes of the cache: gws are the served Gateways of the host, already
// limited to the namespaces allowed to publish it. Listener reservations
// are the controller's to check: a host whose key exists is reserved.
//
// nsLabels reads a namespace's labels for allowedRoutes selectors (nil, or
// nil labels: a selector matches nothing).
func RulesFor(ctx context.Context, reader client.Reader, host string, gws []*gwv1.Gateway, nsLabels func(ns string) labels.Set) ([]Rule, error) {
	if len(gws) == 0 {
		return nil, nil
	}
	var list gwv1.HTTPRouteList
	if err := reader.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing HTTPRoutes: %w", err)
	}
	return RulesOfHost(host, gws, list.Items, nsLabels), nil
}

// RoutesOfHost are the routes of routes, not being deleted, that attach
// to a listener hostname host through gws (a Gateway's address:
// RoutesOfAddress).
func RoutesOfHost(host string, gws []*gwv1.Gateway, routes []gwv1.HTTPRoute, nsLabels func(ns string) labels.Set) []*gwv1.HTTPRoute {
	evaluated := Gateways{}
	for _, gw := range gws {
		own := Verdict{OK: true, Address: OwnAddress(gw)}
		own.OK = own.Address != ""
		open := Reservations{Host: func(string) Verdict { return Verdict{OK: true} }, Port: func(int32) Verdict { return Verdict{OK: true} },
			Address: func(gwv1.ProtocolType, int32) Verdict { return own }}
		evaluated[client.ObjectKeyFromObject(gw)] = Evaluated{Gateway: gw, Listeners: Evaluate(gw, open)}
	}
	var out []*gwv1.HTTPRoute
	for i := range routes {
		rt := &routes[i]
		if !rt.DeletionTimestamp.IsZero() {
			continue
		}
		info := HTTPRouteInfo(rt, nsLabels)
		for _, p := range Attach(info, evaluated) {
			if p.Accepted && contains(p.Hosts, host) {
				out = append(out, rt)
				break
			}
		}
	}
	return out
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// HostHandler maps Gateway and HTTPRoute events to host requests: a Gateway's hosts before and after a change, and
// the hosts of the Gateways an HTTPRoute names.
func HostHandler(reader client.Reader) handler.EventHandler {
	enqueue := func(ctx context.Context, q pubhost.Queue, objs ...client.Object) {
		hosts := map[string]bool{}
		for _, o := range objs {
			switch v := o.(type) {
			case *gwv1.Gateway:
				for _, h := range Hosts(v) {
					hosts[h] = true
				}
			case *gwv1.HTTPRoute:
				for _, ref := range v.Spec.ParentRefs {
					ns := v.Namespace
					if ref.Namespace != nil {
						ns = string(*ref.Namespace)
					}
					var gw gwv1.Gateway
					if err := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: string(ref.Name)}, &gw); err == nil {
						for _, h := range Hosts(&gw) {
							hosts[h] = true
						}
					}
				}
			}
		}
		for h := range maps.Keys(hosts) {
			q.Add(pubhost.Request(h))
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q pubhost.Queue) { enqueue(ctx, q, e.Object) },
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q pubhost.Queue) {
			enqueue(ctx, q, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc:  func(ctx context.Context, e event.DeleteEvent, q pubhost.Queue) { enqueue(ctx, q, e.Object) },
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q pubhost.Queue) { enqueue(ctx, q, e.Object) },
	}
}

// HostsChanged lets through the Gateway events that may change its hosts
// or their tables: a new generation, a new own address in its status
// (AssignAddresses), or other listeners accepted in its status (which
// hostnames its address answers for, RoutesOfAddress): the controller
// writes both without a spec change.
func HostsChanged() predicate.Predicate {
	return predicate.Or(predicate.GenerationChangedPredicate{}, predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*gwv1.Gateway)
			n, ok2 := e.ObjectNew.(*gwv1.Gateway)
			return ok1 && ok2 && (OwnAddress(o) != OwnAddress(n) || !sameListeners(o, n))
		},
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	})
}

// AllHostsHandler maps events to the hosts of every Gateway: a
// GatewayClass appearing, going or changing its controllerName changes
// which Gateways are served, and a ReferenceGrant or BackendTLSPolicy may
// concern a backend of any of them.
func AllHostsHandler(reader client.Reader) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list gwv1.GatewayList
		if err := reader.List(ctx, &list); err != nil {
			return nil
		}
		hosts := map[string]bool{}
		for i := range list.Items {
			for _, h := range Hosts(&list.Items[i]) {
				hosts[h] = true
			}
		}
		out := make([]reconcile.Request, 0, len(hosts))
		for h := range maps.Keys(hosts) {
			out = append(out, pubhost.Request(h))
		}
		return out
	})
}
