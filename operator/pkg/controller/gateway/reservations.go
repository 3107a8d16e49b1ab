package gateway

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	reservations "code.tuna.am/tuna/k8s-operator/operator/pkg/controller/reservation"
	model "code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// reserved answers for a Gateway of namespace ns from the cluster's
// Domains and TCPEndpoints: the same rule as Ingress hosts and
// LoadBalancer ports. A host or port is the namespace's when its
// reservation lives there, or is shared with it (spec.sharedWith); one of
// another namespace that is not shared is a conflict. The edge enforces the
// same ownership when the host's key is issued.
//
// On an edge that takes any host, a host no Domain reserves belongs to the
// namespace that publishes it first, as the edge's first claim decides
// when its key is issued.
func reserved(ns string, domains []tunav1.Domain, endpoints []tunav1.TCPEndpoint, edge edgeRules) model.Reservations {
	return model.Reservations{
		Address: func(protocol gwv1.ProtocolType, port int32) model.Verdict {
			want := edge.port
			if protocol == gwv1.HTTPSProtocolType {
				want = edge.httpsPort
			}
			switch {
			case edge.own != "" && want == 0:
				return model.Verdict{Message: "the listener has no hostname, so it is published on the Gateway's own address, which the edge serves on HTTP only (it has no public HTTPS listener): set hostname to a reserved domain of this namespace, or use protocol HTTP"}
			case edge.own != "" && port != want:
				return model.Verdict{Message: fmt.Sprintf("the listener has no hostname, so it is published on the Gateway's own address, which the edge serves %s on port %d, not %d: set port to %d",
					protocol, want, port, want)}
			case edge.own != "":
				return model.Verdict{OK: true, Address: edge.own}
			case edge.pool == 0:
				return model.Verdict{Message: "the listener has no hostname and the edge hands out no Gateway addresses (tuna-edge serve --gateway-addresses): set hostname to a reserved domain of this namespace (kubectl get domain)"}
			}
			return model.Verdict{Message: fmt.Sprintf("the listener has no hostname and all %d Gateway addresses of the edge are taken by older Gateways: set hostname to a reserved domain of this namespace, or ask the edge's admin for more addresses", edge.pool)}
		},
		Host: func(host string) model.Verdict {
			// A wildcard "*.parent" is the holder's of parent: its Domain's
			// namespace (or those it is shared with), as the edge decides.
			name, wildcard := host, model.IsWildcard(host)
			if wildcard {
				name = host[2:]
			}
			var other *tunav1.Domain
			for i := range domains {
				d := &domains[i]
				if d.Status.FQDN != name || !ready(d.Status.Conditions) {
					continue
				}
				if d.Namespace == ns || slices.Contains(d.Spec.SharedWith, ns) {
					if wildcard {
						return model.Verdict{OK: true, Address: host}
					}
					return model.Verdict{OK: true, Address: reservations.DNSTarget(host, d.Spec.Domain != "", d.Status.DNSRecords)}
				}
				other = d
			}
			if other != nil {
				return model.Verdict{Conflict: true, Message: fmt.Sprintf("host %s belongs to namespace %s (Domain %s): ask its owner to add namespace %s to spec.sharedWith, or choose another hostname",
					host, other.Namespace, other.Name, ns)}
			}
			if first := edge.first[host]; edge.anyHost && first.ns != ns {
				return model.Verdict{Conflict: true, Message: fmt.Sprintf("host %s is published first by namespace %s, which holds it: reserve it with a Domain that lists namespace %s in spec.sharedWith to share it",
					host, first.ns, ns)}
			}
			if w, by := edge.coveredBy(host); edge.anyHost && by != "" && by != ns {
				return model.Verdict{Conflict: true, Message: fmt.Sprintf("host %s is under %s, which namespace %s published first and holds with the names under it: choose a hostname outside it",
					host, w, by)}
			}
			if edge.anyHost {
				return model.Verdict{OK: true, Address: host}
			}
			if wildcard {
				return model.Verdict{Message: fmt.Sprintf("wildcard %s needs %s to be a reserved domain of namespace %s: create a Domain for it there (kubectl get domain shows the reserved ones)", host, name, ns)}
			}
			return model.Verdict{Message: fmt.Sprintf("host %s is not a reserved domain of namespace %s: create a Domain for it there (kubectl get domain shows the reserved ones)", host, ns)}
		},
		Port: func(port int32) model.Verdict {
			var other *tunav1.TCPEndpoint
			for i := range endpoints {
				e := &endpoints[i]
				if e.Status.Port != port || !ready(e.Status.Conditions) {
					continue
				}
				if e.Namespace == ns || slices.Contains(e.Spec.SharedWith, ns) {
					return model.Verdict{OK: true, Address: e.Status.Address}
				}
				other = e
			}
			if other != nil {
				return model.Verdict{Conflict: true, Message: fmt.Sprintf("TCP port %d belongs to namespace %s (TCPEndpoint %s): ask its owner to add namespace %s to spec.sharedWith, or choose another port",
					port, other.Namespace, other.Name, ns)}
			}
			return model.Verdict{Message: fmt.Sprintf("TCP port %d is not a reserved TCPEndpoint of namespace %s: create a TCPEndpoint there and use its status.port", port, ns)}
		},
	}
}

// edgeRules are what the edge allows a Gateway beyond reservations.
type edgeRules struct {
	// anyHost: the edge takes any host (tuna-edge serve --any-host).
	anyHost bool
	// first is the oldest Gateway with a listener for each host: on an
	// any-host edge, its namespace is the one an unreserved host is for.
	first map[string]publisher
	// own is the Gateway's own address, for an HTTP or HTTPS listener
	// without a hostname ("" when none is free), of pool Gateway addresses.
	own  string
	pool int
	// port and httpsPort are where the edge serves Gateway addresses
	// HTTP and HTTPS (0: no HTTPS).
	port, httpsPort int32
}

// publisher is the namespace of a host's oldest Gateway, and that
// Gateway's place among the served Gateways (oldest first).
type publisher struct {
	ns    string
	order int
}

// firstPublishers maps each listener host of gws (oldest first) to its
// oldest Gateway.
func firstPublishers(gws []*gwv1.Gateway) map[string]publisher {
	out := map[string]publisher{}
	for i, gw := range gws {
		for _, l := range gw.Spec.Listeners {
			if h := model.Host(l); h != "" {
				if _, ok := out[h]; !ok {
					out[h] = publisher{ns: gw.Namespace, order: i}
				}
			}
		}
	}
	return out
}

// coveredBy is, on an any-host edge, the name above host that was
// published before it, and that name's namespace ("" when none): the edge
// gives the names under a wildcard nobody held before it to the
// wildcard's holder, the nearest first, and a wildcard "*.parent" to
// parent's holder.
func (e edgeRules) coveredBy(host string) (name, ns string) {
	mine, ok := e.first[host]
	above := model.CoveringWildcards(host)
	if model.IsWildcard(host) {
		above = append([]string{host[2:]}, above...)
	}
	for _, w := range above {
		if p, held := e.first[w]; held && (!ok || p.order < mine.order) {
			return w, p.ns
		}
	}
	return "", ""
}

// ready: Ready is True, or Unknown (reserved, and the edge cannot confirm
// it right now: stay published, fail static).
func ready(conds []metav1.Condition) bool {
	c := status.Find(conds, tunav1.ConditionReady)
	return c != nil && c.Status != metav1.ConditionFalse
}
