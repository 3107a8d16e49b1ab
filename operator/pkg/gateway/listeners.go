package gateway

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Verdict is whether a Gateway's namespace may publish a host or a TCP
// port: a reserved Domain or TCPEndpoint of its namespace, under the same
// ownership rules as Ingress hosts and LoadBalancer ports.
type Verdict struct {
	OK bool
	// Conflict: another namespace owns the host or port.
	Conflict bool
	Message  string
	// Address is what clients use: the host (or its CNAME target) or the
	// edge's TCP host.
	Address string
}

// Reservations answers for the Gateway's namespace.
type Reservations struct {
	Host func(host string) Verdict
	Port func(port int32) Verdict
	// Address answers for an HTTP or HTTPS listener without a hostname:
	// the Gateway's own address on the edge (one of its Gateway
	// addresses), where every request is the Gateway's whatever its Host.
	// nil: none.
	Address func(protocol gwv1.ProtocolType, port int32) Verdict
	// Certificates resolves an HTTPS listener's tls.certificateRefs (nil:
	// they are not checked, as the agent, which serves routes, needs).
	Certificates func(l gwv1.Listener) CertVerdict
}

// Listener is one listener as evaluated.
type Listener struct {
	Name     string
	Protocol gwv1.ProtocolType
	Host     string // HTTP and HTTPS; the Gateway's address for AnyHost
	// Hostname is the spec's hostname, lower case ("" for none; it may be
	// a wildcard), which routes' hostnames must intersect to attach.
	Hostname string
	// AnyHost: a listener without a hostname, published on the Gateway's
	// address, takes routes of any hostname.
	AnyHost  bool
	Port     int32 // the listener's port; TCP: the reserved public port
	Kinds    []gwv1.RouteGroupKind
	Accepted bool
	// Programmed: accepted, and its certificateRefs resolve.
	Programmed bool
	// Certs are the certificates of an HTTPS listener's certificateRefs,
	// when they resolve.
	Certs   []Certificate
	Address string
	// Conditions: Accepted, Programmed, ResolvedRefs, Conflicted.
	Conditions []metav1.Condition
}

// Supports reports whether routes of kind may attach to l.
func (l Listener) Supports(kind string) bool {
	return slices.ContainsFunc(l.Kinds, func(k gwv1.RouteGroupKind) bool { return string(k.Kind) == kind })
}

func cond(t, reason string, ok bool, gen int64, msg string) metav1.Condition {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen}
}

var group = gwv1.Group(gwv1.GroupName)

// kindsFor is what routes a listener of protocol p takes.
func kindsFor(p gwv1.ProtocolType) []gwv1.RouteGroupKind {
	switch p {
	case gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType:
		return []gwv1.RouteGroupKind{{Group: &group, Kind: "HTTPRoute"}}
	case gwv1.TCPProtocolType:
		return []gwv1.RouteGroupKind{{Group: &group, Kind: "TCPRoute"}}
	}
	return nil
}

// Evaluate checks every listener of gw: its protocol, its hostname or
// port against the namespace's reservations, its route kinds, and
// duplicates within the Gateway (the first listener wins).
func Evaluate(gw *gwv1.Gateway, res Reservations) []Listener {
	gen := gw.Generation
	out := make([]Listener, 0, len(gw.Spec.Listeners))
	seen := map[string]string{} // host or port -> listener name
	for _, spec := range gw.Spec.Listeners {
		l := Listener{Name: string(spec.Name), Protocol: spec.Protocol, Port: int32(spec.Port)}
		if spec.Hostname != nil {
			l.Hostname = strings.ToLower(string(*spec.Hostname))
		}
		supported := kindsFor(spec.Protocol)
		accepted := cond(string(gwv1.ListenerConditionAccepted), string(gwv1.ListenerReasonAccepted), true, gen, "the listener is published through the edge")
		conflicted := cond(string(gwv1.ListenerConditionConflicted), string(gwv1.ListenerReasonNoConflicts), false, gen, "no conflict")
		resolved := cond(string(gwv1.ListenerConditionResolvedRefs), string(gwv1.ListenerReasonResolvedRefs), true, gen, "TLS ends at the edge, with its certificates")
		reject := func(reason gwv1.ListenerConditionReason, msg string) {
			accepted = cond(string(gwv1.ListenerConditionAccepted), string(reason), false, gen, msg)
		}
		key := ""
		switch {
		case supported == nil:
			reject(gwv1.ListenerReasonUnsupportedProtocol, fmt.Sprintf("protocol %s is not supported: use HTTP or HTTPS (TLS ends at the edge) or TCP", spec.Protocol))
		case Static(gw):
			reject(gwv1.ListenerReasonUnsupportedValue, "not published: the Gateway sets spec.addresses, which is not supported (its addresses are the edge's): remove spec.addresses")
		case spec.Protocol == gwv1.TCPProtocolType:
			key = "port/" + strconv.Itoa(int(spec.Port))
			if v := res.Port(int32(spec.Port)); !v.OK {
				reject(gwv1.ListenerReasonPortUnavailable, v.Message)
				if v.Conflict {
					conflicted = cond(string(gwv1.ListenerConditionConflicted), string(gwv1.ListenerReasonProtocolConflict), true, gen, v.Message)
				}
			} else {
				l.Address = v.Address
			}
		default:
			l.Host = Host(spec)
			key = "host/" + l.Host
			switch spec.Hostname {
			case nil:
				v := Verdict{Message: "the listener has no hostname and the edge hands out no Gateway addresses (tuna-edge serve --gateway-addresses): set hostname to a reserved domain of this namespace (kubectl get domain)"}
				if res.Address != nil {
					v = res.Address(spec.Protocol, int32(spec.Port))
				}
				if !v.OK {
					reject(gwv1.ListenerReasonUnsupportedValue, v.Message)
					if v.Conflict {
						conflicted = cond(string(gwv1.ListenerConditionConflicted), string(gwv1.ListenerReasonHostnameConflict), true, gen, v.Message)
					}
				} else {
					l.Host, l.Address, l.AnyHost = v.Address, v.Address, true
					key = "address"
				}
			default:
				v := res.Host(l.Host)
				if !v.OK && !v.Conflict && IsWildcard(l.Host) {
					// A wildcard the edge cannot publish is still served
					// on the Gateway's own address, when it has one.
					a := wildcardOnAddress(gw, spec, res)
					if a.OK {
						l.Host, key = "", "wildcard/"+l.Hostname
						accepted.Message = a.Message + " (" + v.Message + ")"
						break
					}
					v.Message += "; " + a.Message
				}
				if !v.OK {
					reject(gwv1.ListenerReasonUnsupportedValue, v.Message)
					if v.Conflict {
						conflicted = cond(string(gwv1.ListenerConditionConflicted), string(gwv1.ListenerReasonHostnameConflict), true, gen, v.Message)
					}
				} else {
					l.Address = v.Address
				}
			}
		}
		if accepted.Status == metav1.ConditionTrue && key != "" {
			if other, dup := seen[key+"/"+string(spec.Protocol)]; dup {
				msg := fmt.Sprintf("listener %s already publishes this with protocol %s", other, spec.Protocol)
				reason := gwv1.ListenerReasonHostnameConflict
				if spec.Protocol == gwv1.TCPProtocolType {
					reason = gwv1.ListenerReasonProtocolConflict
				}
				conflicted = cond(string(gwv1.ListenerConditionConflicted), string(reason), true, gen, msg)
				reject(gwv1.ListenerReasonUnsupportedValue, msg)
			} else {
				seen[key+"/"+string(spec.Protocol)] = l.Name
			}
		}
		l.Kinds = supported
		if ar := spec.AllowedRoutes; ar != nil && len(ar.Kinds) > 0 && supported != nil {
			var kinds []gwv1.RouteGroupKind
			for _, k := range ar.Kinds {
				if (k.Group == nil || *k.Group == group) && string(k.Kind) == string(supported[0].Kind) {
					kinds = append(kinds, supported[0])
				}
			}
			l.Kinds = kinds
			switch {
			case len(kinds) == 0:
				resolved = cond(string(gwv1.ListenerConditionResolvedRefs), string(gwv1.ListenerReasonInvalidRouteKinds), false, gen,
					fmt.Sprintf("allowedRoutes.kinds names no kind this listener takes: %s", supported[0].Kind))
			case len(kinds) < len(ar.Kinds):
				// The listener still takes the kinds it supports
				// (supportedKinds); the condition names the others.
				resolved = cond(string(gwv1.ListenerConditionResolvedRefs), string(gwv1.ListenerReasonInvalidRouteKinds), false, gen,
					fmt.Sprintf("allowedRoutes.kinds names kinds this listener does not take: it takes only %s", supported[0].Kind))
			}
		}
		certsOK := true
		if spec.Protocol == gwv1.HTTPSProtocolType && res.Certificates != nil {
			v := res.Certificates(spec)
			certsOK, l.Certs = v.OK, v.Certs
			if !v.OK && resolved.Status == metav1.ConditionTrue {
				resolved = cond(string(gwv1.ListenerConditionResolvedRefs), string(v.Reason), false, gen, v.Message)
			}
			if v.OK && len(v.Certs) > 0 && resolved.Status == metav1.ConditionTrue {
				resolved.Message = "the certificateRefs resolve"
			}
		}
		l.Accepted = accepted.Status == metav1.ConditionTrue && len(l.Kinds) > 0
		l.Programmed = l.Accepted && certsOK
		programmed := cond(string(gwv1.ListenerConditionProgrammed), string(gwv1.ListenerReasonProgrammed), true, gen, "published through the edge")
		switch {
		case !l.Accepted:
			programmed = cond(string(gwv1.ListenerConditionProgrammed), string(gwv1.ListenerReasonInvalid), false, gen, "not published: see the Accepted and ResolvedRefs conditions")
		case !certsOK:
			programmed = cond(string(gwv1.ListenerConditionProgrammed), string(gwv1.ListenerReasonInvalid), false, gen,
				"not programmed: its certificateRefs do not resolve (see ResolvedRefs); until they do, its host answers HTTPS with the edge's own certificate")
		}
		l.Conditions = []metav1.Condition{accepted, programmed, resolved, conflicted}
		out = append(out, l)
	}
	return out
}

// GatewayConditions are the Gateway's Accepted and Programmed conditions
// and its addresses, from its evaluated listeners and own, the Gateway's
// own address when it serves a listener with a hostname there (the
// controller decides it: AddressServes); a listener without a hostname
// carries the address itself. The own address comes first: clients, and
// the conformance suite, take the first.
func GatewayConditions(gw *gwv1.Gateway, ls []Listener, own string) ([]metav1.Condition, []gwv1.GatewayStatusAddress) {
	gen := gw.Generation
	ok := 0
	var addrs []gwv1.GatewayStatusAddress
	seen := map[string]bool{}
	hostname, ip := gwv1.HostnameAddressType, gwv1.IPAddressType
	for _, l := range ls {
		if !l.Accepted {
			continue
		}
		ok++
		a := l.Address
		if h, _, err := net.SplitHostPort(a); err == nil {
			a = h
		}
		if a != "" && !seen[a] {
			seen[a] = true
			if l.AnyHost {
				addrs = slices.Insert(addrs, 0, gwv1.GatewayStatusAddress{Type: &ip, Value: a})
			} else {
				addrs = append(addrs, gwv1.GatewayStatusAddress{Type: &hostname, Value: a})
			}
		}
	}
	if own != "" && ok > 0 && !seen[own] {
		addrs = slices.Insert(addrs, 0, gwv1.GatewayStatusAddress{Type: &ip, Value: own})
	}
	accepted := cond(string(gwv1.GatewayConditionAccepted), string(gwv1.GatewayReasonAccepted), true, gen, "every listener is accepted")
	switch {
	case len(gw.Spec.Addresses) > 0:
		accepted = cond(string(gwv1.GatewayConditionAccepted), string(gwv1.GatewayReasonUnsupportedAddress), false, gen,
			"spec.addresses is not supported: the Gateway's addresses are the edge's (status.addresses)")
		addrs = nil
	case ok == 0:
		accepted = cond(string(gwv1.GatewayConditionAccepted), string(gwv1.GatewayReasonListenersNotValid), false, gen, "no listener is accepted: see status.listeners")
	case ok < len(ls):
		accepted = cond(string(gwv1.GatewayConditionAccepted), string(gwv1.GatewayReasonListenersNotValid), true, gen,
			fmt.Sprintf("%d of %d listeners are accepted: see status.listeners", ok, len(ls)))
	}
	programmed := cond(string(gwv1.GatewayConditionProgrammed), string(gwv1.GatewayReasonProgrammed), true, gen, "published through the edge")
	if len(addrs) == 0 {
		programmed = cond(string(gwv1.GatewayConditionProgrammed), string(gwv1.GatewayReasonAddressNotAssigned), false, gen, "no listener is published, so the Gateway has no address")
		if accepted.Status == metav1.ConditionFalse {
			programmed.Reason = string(gwv1.GatewayReasonInvalid)
		}
	}
	return []metav1.Condition{accepted, programmed}, addrs
}
