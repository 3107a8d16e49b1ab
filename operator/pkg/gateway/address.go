package gateway

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

// A Gateway's own address is reached by clients with any Host, as an
// in-cluster Gateway's load balancer address is: a request whose Host a
// listener with a hostname accepts is that listener's, the others are
// the listeners' without a hostname. The address's table therefore holds
// the routes of all the Gateway's accepted HTTP and HTTPS listeners, each
// under the hosts it serves there (AddressRoute.Hosts), and the routes of
// no other Gateway.

// AddressHolder is the Gateway whose routes addr serves: the oldest of gws
// (oldest first, as Source.ServedFor lists them) whose status holds addr,
// nil when none does. AssignAddresses keeps an address for the oldest
// Gateway whose status holds it, so a younger Gateway whose status names
// it too (stale, or written by hand) adds nothing to the address.
func AddressHolder(addr string, gws []*gwv1.Gateway) *gwv1.Gateway {
	for _, gw := range gws {
		if OwnAddress(gw) == addr {
			return gw
		}
	}
	return nil
}

// AddressServes reports whether a Gateway's own address serves one of
// its evaluated listeners ls with a hostname: accepted (the hostname is
// the namespace's), HTTP on httpPort or HTTPS on httpsPort, the ports the
// edge serves its addresses on (0: no HTTPS there). Only then does a
// Gateway whose listeners all have hostnames want an address
// (AssignAddresses), and its status list it: a client that dials the
// address at the listener's port reaches the listener's routes.
func AddressServes(ls []Listener, httpPort, httpsPort int32) bool {
	return slices.ContainsFunc(ls, func(l Listener) bool {
		if !l.Accepted || l.Hostname == "" || l.AnyHost {
			return false
		}
		switch l.Protocol {
		case gwv1.HTTPProtocolType:
			return l.Port == httpPort
		case gwv1.HTTPSProtocolType:
			return httpsPort != 0 && l.Port == httpsPort
		}
		return false
	})
}

// StatusAccepted reports whether gw's status says that its listener name
// is accepted, for the Gateway's current generation: what the controller
// decided against the namespace's reservations, which the agent cannot
// check itself.
func StatusAccepted(gw *gwv1.Gateway, name string) bool {
	for _, l := range gw.Status.Listeners {
		if string(l.Name) != name {
			continue
		}
		c := meta.FindStatusCondition(l.Conditions, string(gwv1.ListenerConditionAccepted))
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == gw.Generation
	}
	return false
}

// acceptedListeners are the names of gw's listeners its status says are
// accepted (StatusAccepted): a change of them changes the address's table.
func acceptedListeners(gw *gwv1.Gateway) []string {
	var out []string
	for _, l := range gw.Spec.Listeners {
		if StatusAccepted(gw, string(l.Name)) {
			out = append(out, string(l.Name))
		}
	}
	return out
}

// Intersection is the hosts a route with hostnames serves through a
// listener with hostname listener ("" none), as the Gateway API defines
// it: without a listener hostname, each of the route's hostnames, or any
// host ("") without them; without route hostnames, the listener's; else
// each route hostname equal to the listener's or under its wildcard, and
// the listener's own when a route wildcard covers it. Lower case, in the
// route's order, distinct; empty when they have no host in common.
func Intersection(listener string, hostnames []gwv1.Hostname) []string {
	listener = strings.ToLower(listener)
	if len(hostnames) == 0 {
		return []string{listener}
	}
	var out []string
	for _, h := range hostnames {
		s := strings.ToLower(string(h))
		switch {
		case listener == "" || s == listener || wildcardCovers(listener, s):
			out = appendNew(out, s)
		case wildcardCovers(s, listener):
			out = appendNew(out, listener)
		}
	}
	return out
}

// wildcardOnAddress answers for an HTTP or HTTPS listener with a wildcard
// hostname that the edge does not publish as a wildcard host of the
// namespace (no --any-host, no Domain of its parent): it is served on the
// Gateway's own address only, which a listener without a hostname gives
// it (NeedsAddress), where requests of the hosts under the wildcard reach
// its routes. Accepted on that address's port only.
func wildcardOnAddress(gw *gwv1.Gateway, spec gwv1.Listener, res Reservations) Verdict {
	if !NeedsAddress(gw) || res.Address == nil {
		return Verdict{Message: fmt.Sprintf("wildcard hostname %s is not published by the edge, and the Gateway has no address of its own to serve it on: add a listener without a hostname", *spec.Hostname)}
	}
	v := res.Address(spec.Protocol, int32(spec.Port))
	if !v.OK {
		return Verdict{Message: fmt.Sprintf("wildcard hostname %s is served only on the Gateway's own address: %s", *spec.Hostname, v.Message)}
	}
	return Verdict{OK: true, Message: fmt.Sprintf("the listener is served on the Gateway's own address %s only", v.Address)}
}

// AddressRoute is a route as its Gateway's address serves it: its rules
// hold for requests of Hosts ("" any host).
type AddressRoute struct {
	Route *gwv1.HTTPRoute
	Hosts []string
}

// RoutesOfAddress are the routes, not being deleted, that the address
// addr serves: those attached to its holder's accepted HTTP and HTTPS
// listeners (AddressHolder of gws), with the hosts each serves there. A
// listener without a hostname is published on the address itself; one
// with a hostname counts while the Gateway's status says it is accepted
// (StatusAccepted), so that the address answers for a hostname only while
// the namespace may publish it.
func RoutesOfAddress(addr string, gws []*gwv1.Gateway, routes []gwv1.HTTPRoute, nsLabels func(ns string) labels.Set) []AddressRoute {
	gw := AddressHolder(addr, gws)
	if gw == nil {
		return nil
	}
	own := Verdict{OK: true, Address: addr}
	open := Reservations{Host: func(string) Verdict { return Verdict{OK: true} }, Port: func(int32) Verdict { return Verdict{OK: true} },
		Address: func(gwv1.ProtocolType, int32) Verdict { return own }}
	listeners := Evaluate(gw, open)
	byName := map[string]Listener{}
	for i := range listeners {
		l := &listeners[i]
		if !l.AnyHost && (l.Hostname == "" || !StatusAccepted(gw, l.Name)) {
			l.Accepted = false // a hostname not (yet) the namespace's
		}
		byName[l.Name] = *l
	}
	evaluated := Gateways{client.ObjectKeyFromObject(gw): {Gateway: gw, Listeners: listeners}}
	var out []AddressRoute
	for i := range routes {
		rt := &routes[i]
		if !rt.DeletionTimestamp.IsZero() {
			continue
		}
		info := HTTPRouteInfo(rt, nsLabels)
		var hosts []string
		for _, p := range Attach(info, evaluated) {
			if !p.Accepted {
				continue
			}
			for _, name := range p.Listeners {
				l := byName[name]
				hostname := l.Hostname
				if l.AnyHost {
					hostname = ""
				}
				for _, h := range Intersection(hostname, rt.Spec.Hostnames) {
					hosts = appendNew(hosts, h)
				}
			}
		}
		if len(hosts) > 0 {
			out = append(out, AddressRoute{Route: rt, Hosts: hosts})
		}
	}
	return out
}

// RoutesOfWildcard are routes, attached to a wildcard listener hostname
// host, as its tunnel serves them: the edge sends it every name under
// host that nobody else holds, so each route holds for the hosts it has
// in common with host (Intersection), not for all of them.
func RoutesOfWildcard(host string, routes []*gwv1.HTTPRoute) []AddressRoute {
	out := make([]AddressRoute, 0, len(routes))
	for _, rt := range routes {
		if hosts := Intersection(host, rt.Spec.Hostnames); len(hosts) > 0 {
			out = append(out, AddressRoute{Route: rt, Hosts: hosts})
		}
	}
	return out
}

// AddressRules are the rules of routes as their address serves them: each
// rule once per host of its route, with that host as its condition (the
// router tries an exact host first, then longer wildcards, then any host).
func AddressRules(routes []AddressRoute) []Rule {
	hosts := map[*gwv1.HTTPRoute][]string{}
	list := make([]*gwv1.HTTPRoute, 0, len(routes))
	for _, r := range routes {
		hosts[r.Route] = r.Hosts
		list = append(list, r.Route)
	}
	var out []Rule
	for _, r := range Rules(list) {
		for _, h := range hosts[r.Route] {
			hr := r
			if h != "" {
				c := pubhost.Conditions{}
				if r.Conditions != nil {
					c = *r.Conditions
				}
				c.Host = h
				hr.Conditions = &c
			}
			out = append(out, hr)
		}
	}
	return out
}

// RulesOfHost are the rules of host's table, from routes already listed
// and gws, the served Gateways that publish host (limited to the
// namespaces allowed to publish it): a Gateway's address serves its
// holder's routes by host (RoutesOfAddress), a listener's hostname the
// routes attached to it (RoutesOfHost).
func RulesOfHost(host string, gws []*gwv1.Gateway, routes []gwv1.HTTPRoute, nsLabels func(ns string) labels.Set) []Rule {
	switch {
	case IsAddress(host):
		return AddressRules(RoutesOfAddress(host, gws, routes, nsLabels))
	case IsWildcard(host):
		return AddressRules(RoutesOfWildcard(host, RoutesOfHost(host, gws, routes, nsLabels)))
	}
	return Rules(RoutesOfHost(host, gws, routes, nsLabels))
}

// sameListeners reports whether two versions of a Gateway have the same
// accepted listeners in their status.
func sameListeners(a, b *gwv1.Gateway) bool {
	return slices.Equal(acceptedListeners(a), acceptedListeners(b))
}
