package gateway

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Parent is one parentRef of a route, resolved against a served Gateway.
type Parent struct {
	Ref     gwv1.ParentReference
	Gateway *gwv1.Gateway
	// Listeners the route attached to, and the hosts it serves on them
	// (TCP listeners: none).
	Listeners []string
	Hosts     []string
	// Attached are the listeners that select the route, whatever their
	// own conditions: allowedRoutes (kind and namespace), the parentRef's
	// sectionName and port, and hostnames that intersect. They count it in
	// attachedRoutes, as the Gateway API defines it.
	Attached []string
	Accepted bool
	Reason   gwv1.RouteConditionReason
	Message  string
}

// Gateways are the served Gateways with their evaluated listeners.
type Gateways map[types.NamespacedName]Evaluated

// Evaluated is a served Gateway and its listeners.
type Evaluated struct {
	Gateway   *gwv1.Gateway
	Listeners []Listener
	// Own is the Gateway's own address when it serves a listener with a
	// hostname there (AddressServes), which status.addresses lists first.
	Own string
}

// RouteInfo is what attachment needs of a route.
type RouteInfo struct {
	Kind      string // HTTPRoute, TCPRoute
	Namespace string
	Hostnames []gwv1.Hostname
	Parents   []gwv1.ParentReference
	// NamespaceLabels are the labels of the route's namespace, for
	// allowedRoutes selectors (nil: unknown, a selector does not match).
	NamespaceLabels labels.Set
}

// HTTPRouteInfo is rt as Attach sees it; nsLabels reads its namespace's
// labels (nil: unknown).
func HTTPRouteInfo(rt *gwv1.HTTPRoute, nsLabels func(ns string) labels.Set) RouteInfo {
	info := RouteInfo{Kind: "HTTPRoute", Namespace: rt.Namespace, Hostnames: rt.Spec.Hostnames, Parents: rt.Spec.ParentRefs}
	if nsLabels != nil {
		info.NamespaceLabels = nsLabels(rt.Namespace)
	}
	return info
}

// Attach resolves a route's parentRefs that name served Gateways; refs to
// anything else are left out (another controller answers for them).
func Attach(r RouteInfo, gws Gateways) []Parent {
	var out []Parent
	for _, ref := range r.Parents {
		if ref.Group != nil && *ref.Group != group || ref.Kind != nil && *ref.Kind != "Gateway" {
			continue
		}
		ns := r.Namespace
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		ev, ok := gws[types.NamespacedName{Namespace: ns, Name: string(ref.Name)}]
		if !ok {
			continue
		}
		out = append(out, attachOne(r, ref, ev))
	}
	return out
}

func attachOne(r RouteInfo, ref gwv1.ParentReference, ev Evaluated) Parent {
	p := Parent{Ref: ref, Gateway: ev.Gateway}
	named, allowed, hostMatch := false, false, false
	for _, l := range ev.Listeners {
		if ref.SectionName != nil && string(*ref.SectionName) != l.Name {
			continue
		}
		if ref.Port != nil && int32(*ref.Port) != l.Port {
			continue
		}
		named = true
		if !l.Supports(r.Kind) || !namespaceAllowed(ev.Gateway, l.Name, r) {
			continue
		}
		if r.Kind == "TCPRoute" || intersects(r.Hostnames, l.Hostname) {
			p.Attached = append(p.Attached, l.Name)
		}
		if !l.Accepted {
			continue
		}
		allowed = true
		if r.Kind == "TCPRoute" {
			p.Listeners = append(p.Listeners, l.Name)
			continue
		}
		if l.AnyHost || len(Intersection(l.Hostname, r.Hostnames)) > 0 {
			hostMatch = true
			p.Listeners = append(p.Listeners, l.Name)
			if l.Host != "" { // a wildcard served on the address only publishes no host
				p.Hosts = appendNew(p.Hosts, l.Host)
			}
		}
	}
	switch {
	case !named:
		p.Reason, p.Message = gwv1.RouteReasonNoMatchingParent, fmt.Sprintf("Gateway %s/%s has no listener that matches the parentRef's sectionName and port", ev.Gateway.Namespace, ev.Gateway.Name)
	case !allowed:
		p.Reason, p.Message = gwv1.RouteReasonNotAllowedByListeners, fmt.Sprintf("no accepted listener of Gateway %s/%s allows a %s from namespace %s (see the listeners' allowedRoutes and status)", ev.Gateway.Namespace, ev.Gateway.Name, r.Kind, r.Namespace)
	case r.Kind != "TCPRoute" && !hostMatch:
		p.Reason, p.Message = gwv1.RouteReasonNoMatchingListenerHostname, fmt.Sprintf("no hostname of the route matches a listener hostname of Gateway %s/%s", ev.Gateway.Namespace, ev.Gateway.Name)
	default:
		p.Accepted, p.Reason, p.Message = true, gwv1.RouteReasonAccepted, fmt.Sprintf("attached to listener %s", strings.Join(p.Listeners, ", "))
	}
	return p
}

func appendNew(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// namespaceAllowed applies a listener's allowedRoutes.namespaces (default
// Same).
func namespaceAllowed(gw *gwv1.Gateway, listener string, r RouteInfo) bool {
	var ar *gwv1.AllowedRoutes
	for _, l := range gw.Spec.Listeners {
		if string(l.Name) == listener {
			ar = l.AllowedRoutes
		}
	}
	from := gwv1.NamespacesFromSame
	var sel *metav1.LabelSelector
	if ar != nil && ar.Namespaces != nil {
		if ar.Namespaces.From != nil {
			from = *ar.Namespaces.From
		}
		sel = ar.Namespaces.Selector
	}
	switch from {
	case gwv1.NamespacesFromAll:
		return true
	case gwv1.NamespacesFromSame:
		return r.Namespace == gw.Namespace
	case gwv1.NamespacesFromSelector:
		if sel == nil || r.NamespaceLabels == nil {
			return false
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		return err == nil && s.Matches(r.NamespaceLabels)
	}
	return false
}

// intersects reports whether a route's hostnames and a listener's hostname
// ("" for none; it may be a "*." wildcard) have a host in common: no
// hostnames on either side take any.
func intersects(hostnames []gwv1.Hostname, listener string) bool {
	if listener == "" || len(hostnames) == 0 {
		return true
	}
	for _, h := range hostnames {
		s := strings.ToLower(string(h))
		if s == listener || wildcardCovers(s, listener) || wildcardCovers(listener, s) {
			return true
		}
	}
	return false
}

// wildcardCovers reports whether pattern, a "*." wildcard, covers host (a
// name or a narrower wildcard).
func wildcardCovers(pattern, host string) bool {
	suffix, ok := strings.CutPrefix(pattern, "*")
	return ok && strings.HasSuffix(host, suffix) && len(host) > len(suffix)
}

// Granted reports whether a ReferenceGrant in the target namespace lets a
// route of kind fromKind in fromNS refer to the Service name there.
func Granted(grants []gwv1.ReferenceGrant, fromKind, fromNS, toNS, toName string) bool {
	return GrantedTo(grants, fromKind, fromNS, "Service", toNS, toName)
}

// GrantedTo reports whether a ReferenceGrant in namespace toNS lets an
// object of kind fromKind (of the Gateway API's group) in fromNS refer to
// the core object of kind toKind named toName there.
func GrantedTo(grants []gwv1.ReferenceGrant, fromKind, fromNS, toKind, toNS, toName string) bool {
	for _, g := range grants {
		if g.Namespace != toNS {
			continue
		}
		from := false
		for _, f := range g.Spec.From {
			if string(f.Group) == gwv1.GroupName && string(f.Kind) == fromKind && string(f.Namespace) == fromNS {
				from = true
			}
		}
		if !from {
			continue
		}
		for _, t := range g.Spec.To {
			if string(t.Group) == "" && string(t.Kind) == toKind && (t.Name == nil || string(*t.Name) == toName) {
				return true
			}
		}
	}
	return false
}

// NamespaceLabels reads namespaces' labels for allowedRoutes selectors
// (RouteInfo.NamespaceLabels), each namespace once per returned function.
// One the reader may not read (the chart grants the agent get only with
// gatewayClass.namespaceSelectors) has none: a selector matches nothing,
// for the controller's status and the agent's routes alike.
func NamespaceLabels(ctx context.Context, reader client.Reader) func(ns string) labels.Set {
	seen := map[string]labels.Set{}
	return func(ns string) labels.Set {
		if l, ok := seen[ns]; ok {
			return l
		}
		var n corev1.Namespace
		var set labels.Set
		if err := reader.Get(ctx, client.ObjectKey{Name: ns}, &n); err == nil {
			set = labels.Set(n.Labels)
		}
		seen[ns] = set
		return set
	}
}
