// Package gateway is what the controller and the agent agree on about the
// Gateway API: which GatewayClasses and Gateways the operator serves
// (controllerName k8s.tuna.am/gateway-controller), what each listener
// publishes (an HTTP/HTTPS host or a TCP port, ended at the edge), which
// HTTPRoutes attach to which listeners, and how an HTTPRoute's rules turn
// into routes of a host's table (operator/pkg/pubhost: what a published
// host is, whatever its source). It imports nothing of the agent, holds no
// reconciler and does no I/O beyond reading the cache.
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
	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

// Source is the Gateway source of published hosts: the Gateways of
// this controller's classes, not being deleted, and the hosts of their
// listeners (Hosts).
var Source = pubhost.Source[*gwv1.Gateway, *gwv1.GatewayList]{
	Kind:    "Gateways",
	NewList: func() *gwv1.GatewayList { return &gwv1.GatewayList{} },
	Items:   func(l *gwv1.GatewayList) []*gwv1.Gateway { return gatewayPointers(l.Items) },
	Serving: serving,
	Hosts:   Hosts,
}

// serving reads the GatewayClasses for servedBy.
func serving(ctx context.Context, reader client.Reader) (func(*gwv1.Gateway) bool, error) {
	var classes gwv1.GatewayClassList
	if err := reader.List(ctx, &classes); err != nil {
		return nil, fmt.Errorf("listing GatewayClasses: %w", err)
	}
	return servedBy(classes.Items), nil
}

func gatewayPointers(gws []gwv1.Gateway) []*gwv1.Gateway {
	out := make([]*gwv1.Gateway, len(gws))
	for i := range gws {
		out[i] = &gws[i]
	}
	return out
}

// servedBy says whether a Gateway is served, given every GatewayClass: its
// class is one of ours and it is not being deleted.
func servedBy(classes []gwv1.GatewayClass) func(*gwv1.Gateway) bool {
	ours := map[string]bool{}
	for i := range classes {
		if gatewayclass.Ours(&classes[i]) {
			ours[classes[i].Name] = true
		}
	}
	return func(gw *gwv1.Gateway) bool {
		return ours[string(gw.Spec.GatewayClassName)] && gw.DeletionTimestamp.IsZero()
	}
}

// ServedAmong are the Gateways of gws that the operator serves, given
// every GatewayClass, oldest first (Source.Served without the reads).
func ServedAmong(classes []gwv1.GatewayClass, gws []gwv1.Gateway) []*gwv1.Gateway {
	return pubhost.Filter(gatewayPointers(gws), servedBy(classes))
}

// Host returns the host an HTTP or HTTPS listener publishes ("" for other
// protocols, or a listener without a hostname). A wildcard hostname
// ("*.example.com") is published as such: the edge routes to its tunnel
// every name under it that nobody else holds.
func Host(l gwv1.Listener) string {
	if l.Protocol != gwv1.HTTPProtocolType && l.Protocol != gwv1.HTTPSProtocolType {
		return ""
	}
	if l.Hostname == nil {
		return ""
	}
	return strings.ToLower(string(*l.Hostname))
}

// IsWildcard reports whether host is a wildcard hostname "*.parent".
func IsWildcard(host string) bool { return strings.HasPrefix(host, "*.") }

// CoveringWildcards are the wildcards that cover host, the nearest first:
// for "a.b.example.com", "*.b.example.com" then "*.example.com"; for the
// wildcard "*.b.example.com", "*.example.com". A wildcard's parent has
// two labels at least, as the edge requires.
func CoveringWildcards(host string) []string {
	var out []string
	rest := strings.TrimPrefix(host, "*.")
	for {
		_, parent, ok := strings.Cut(rest, ".")
		if !ok || !strings.Contains(parent, ".") {
			return out
		}
		out = append(out, "*."+parent)
		rest = parent
	}
}

// Hosts are the distinct hosts of gw's HTTP and HTTPS listeners, sorted,
// and its own address when such a listener has no hostname: a host of
// the edge like the others, whose tunnel takes every request sent to
// that address.
func Hosts(gw *gwv1.Gateway) []string {
	if Static(gw) {
		return nil
	}
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

// Static reports whether gw asks for addresses of its own
// (spec.addresses), which the operator does not support: nothing of it is
// published, so that a Gateway not accepted serves nothing.
func Static(gw *gwv1.Gateway) bool { return len(gw.Spec.Addresses) > 0 }

// NeedsAddress reports whether gw has an HTTP or HTTPS listener without
// a hostname, which is published on an address of the Gateway's own.
func NeedsAddress(gw *gwv1.Gateway) bool {
	return !Static(gw) && slices.ContainsFunc(gw.Spec.Listeners, func(l gwv1.Listener) bool {
		return (l.Protocol == gwv1.HTTPProtocolType || l.Protocol == gwv1.HTTPSProtocolType) && l.Hostname == nil
	})
}

// WantsAddress reports whether gw has an HTTP or HTTPS listener, with a
// hostname or without: a Gateway whose listeners all have hostnames gets
// an address of its own too while the edge has one free after those that
// need one (AssignAddresses), so that its status lists an address that
// clients reach whatever their DNS says, as an in-cluster Gateway's load
// balancer address; the address serves its listeners' routes by Host.
func WantsAddress(gw *gwv1.Gateway) bool {
	return !Static(gw) && slices.ContainsFunc(gw.Spec.Listeners, func(l gwv1.Listener) bool {
		return l.Protocol == gwv1.HTTPProtocolType || l.Protocol == gwv1.HTTPSProtocolType
	})
}

// OwnAddress is the Gateway's own address as its status holds it (the
// controller assigns it, AssignAddresses): the first IPAddress of
// status.addresses, when it has an HTTP or HTTPS listener; "" otherwise.
func OwnAddress(gw *gwv1.Gateway) string {
	if !WantsAddress(gw) {
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

// AssignAddresses gives Gateways addresses of pool: first each that needs
// one (NeedsAddress), then each that only wants one (WantsAddress) and
// that the address would serve (served: a listener with a hostname that
// is accepted, on the port the address serves its protocol on; nil: every
// one), while some are free. A Gateway keeps the one its status holds when
// it is still in the pool and no older Gateway holds it; the others get
// the first free one, oldest Gateway first. When none is free, a Gateway
// that needs one takes the address of the youngest Gateway that only
// wants one, which then has none (its hostnames still serve it on the
// edge's names). gws are oldest first (Source.Served); a Gateway left out
// has none.
func AssignAddresses(gws []*gwv1.Gateway, pool []string, served func(*gwv1.Gateway) bool) map[client.ObjectKey]string {
	out := map[client.ObjectKey]string{}
	holder := map[string]*gwv1.Gateway{}
	var needing, wanting []*gwv1.Gateway
	for _, gw := range gws {
		needs := NeedsAddress(gw)
		if !WantsAddress(gw) || (!needs && served != nil && !served(gw)) {
			continue
		}
		if a := OwnAddress(gw); a != "" && slices.Contains(pool, a) && holder[a] == nil {
			holder[a] = gw
			out[client.ObjectKeyFromObject(gw)] = a
			continue
		}
		if needs {
			needing = append(needing, gw)
		} else {
			wanting = append(wanting, gw)
		}
	}
	free := func() string {
		for _, a := range pool {
			if holder[a] == nil {
				return a
			}
		}
		return ""
	}
	give := func(gw *gwv1.Gateway, a string) {
		holder[a] = gw
		out[client.ObjectKeyFromObject(gw)] = a
	}
	for _, gw := range needing {
		if a := free(); a != "" {
			give(gw, a)
			continue
		}
		// The youngest Gateway that holds an address it only wants.
		for i := len(gws) - 1; i >= 0; i-- {
			key := client.ObjectKeyFromObject(gws[i])
			if a := out[key]; a != "" && !NeedsAddress(gws[i]) {
				delete(out, key)
				give(gw, a)
				break
			}
		}
	}
	for _, gw := range wanting {
		a := free()
		if a == "" {
			break
		}
		give(gw, a)
	}
	return out
}
