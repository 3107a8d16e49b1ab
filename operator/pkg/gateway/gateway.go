// Package gateway is what the controller and the agent agree on about the
// Gateway API: which GatewayClasses and Gateways the operator serves
// (controllerName k8s.tuna.am/gateway-controller), what each listener
// publishes (an HTTP/HTTPS host or a TCP port, ended at the edge), which
// HTTPRoutes attach to which listeners, and how an HTTPRoute's rules turn
// into router routes. Like operator/pkg/ingress it holds no reconciler and
// does no I/O beyond reading the cache.
package gateway

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/gatewayclass"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/scope"
)

// Served lists the Gateways of this controller's classes in namespaces
// (none: all), not being deleted, oldest first.
func Served(ctx context.Context, reader client.Reader, namespaces ...string) ([]*gwv1.Gateway, error) {
	var classes gwv1.GatewayClassList
	if err := reader.List(ctx, &classes); err != nil {
		return nil, fmt.Errorf("listing GatewayClasses: %w", err)
	}
	ours := map[string]bool{}
	for i := range classes.Items {
		if gatewayclass.Ours(&classes.Items[i]) {
			ours[classes.Items[i].Name] = true
		}
	}
	var list gwv1.GatewayList
	if err := scope.List(ctx, reader, &list, namespaces); err != nil {
		return nil, err
	}
	var out []*gwv1.Gateway
	for i := range list.Items {
		gw := &list.Items[i]
		if ours[string(gw.Spec.GatewayClassName)] && gw.DeletionTimestamp.IsZero() {
			out = append(out, gw)
		}
	}
	SortOldestFirst(out)
	return out, nil
}

// SortOldestFirst orders objects by creation, then namespace/name: the
// Gateway API's tie-break between routes, and the order in which a host's
// namespaces are considered.
func SortOldestFirst[T client.Object](objs []T) {
	slices.SortStableFunc(objs, func(a, b T) int {
		ta, tb := a.GetCreationTimestamp().Time, b.GetCreationTimestamp().Time
		if !ta.Equal(tb) {
			if ta.Before(tb) {
				return -1
			}
			return 1
		}
		if c := strings.Compare(a.GetNamespace(), b.GetNamespace()); c != 0 {
			return c
		}
		return strings.Compare(a.GetName(), b.GetName())
	})
}

// Host returns the host an HTTP or HTTPS listener publishes ("" for other
// protocols, or a listener without a usable hostname).
func Host(l gwv1.Listener) string {
	if l.Protocol != gwv1.HTTPProtocolType && l.Protocol != gwv1.HTTPSProtocolType {
		return ""
	}
	if l.Hostname == nil || strings.HasPrefix(string(*l.Hostname), "*") {
		return ""
	}
	return strings.ToLower(string(*l.Hostname))
}

// Hosts are the distinct hosts of gw's HTTP and HTTPS listeners, sorted,
// and its own address when an HTTP listener has no hostname: a host of
// the edge like the others, whose tunnel takes every request sent to
// that address.
func Hosts(gw *gwv1.Gateway) []string {
	var out []string
	for _, l := range gw.Spec.Listeners {
		if h := Host(l); h != "" {
			out = append(out, h)
		}
	}
	if a := OwnAddress(gw); a != "" {
		out = append(out, a)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// NeedsAddress reports whether gw has an HTTP listener without a
// hostname, which is published on an address of the Gateway's own.
func NeedsAddress(gw *gwv1.Gateway) bool {
	return slices.ContainsFunc(gw.Spec.Listeners, func(l gwv1.Listener) bool {
		return l.Protocol == gwv1.HTTPProtocolType && l.Hostname == nil
	})
}

// OwnAddress is the Gateway's own address as its status holds it (the
// controller assigns it, AssignAddresses): the first IPAddress of
// status.addresses, when an HTTP listener has no hostname; "" otherwise.
func OwnAddress(gw *gwv1.Gateway) string {
	if !NeedsAddress(gw) {
		return ""
	}
	for _, a := range gw.Status.Addresses {
		if a.Type != nil && *a.Type == gwv1.IPAddressType {
			if ip, err := netip.ParseAddr(a.Value); err == nil {
				return ip.String()
			}
		}
	}
	return ""
}

// AssignAddresses gives each Gateway that needs one (NeedsAddress) an
// address of pool: the one its status holds when it is still in the pool
// and no older Gateway holds it, else the first free one, oldest Gateway
// first. gws are oldest first (Served); a Gateway left out has none free.
func AssignAddresses(gws []*gwv1.Gateway, pool []string) map[client.ObjectKey]string {
	out := map[client.ObjectKey]string{}
	taken := map[string]bool{}
	var waiting []*gwv1.Gateway
	for _, gw := range gws {
		if !NeedsAddress(gw) {
			continue
		}
		if a := OwnAddress(gw); a != "" && slices.Contains(pool, a) && !taken[a] {
			taken[a] = true
			out[client.ObjectKeyFromObject(gw)] = a
			continue
		}
		waiting = append(waiting, gw)
	}
	next := 0
	for _, gw := range waiting {
		for next < len(pool) && taken[pool[next]] {
			next++
		}
		if next == len(pool) {
			break
		}
		taken[pool[next]] = true
		out[client.ObjectKeyFromObject(gw)] = pool[next]
	}
	return out
}

// HostIndex is the cache index of Gateways by the hosts of their listeners.
const HostIndex = "k8s.tuna.am/gateway-host"

// IndexHosts is the index function of HostIndex.
func IndexHosts(o client.Object) []string {
	if gw, ok := o.(*gwv1.Gateway); ok {
		return Hosts(gw)
	}
	return nil
}
