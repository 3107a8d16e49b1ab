package gateway

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
func reserved(ns string, domains []tunav1.Domain, endpoints []tunav1.TCPEndpoint) model.Reservations {
	return model.Reservations{
		Host: func(host string) model.Verdict {
			var other *tunav1.Domain
			for i := range domains {
				d := &domains[i]
				if d.Status.FQDN != host || !ready(d.Status.Conditions) {
					continue
				}
				if d.Namespace == ns || slices.Contains(d.Spec.SharedWith, ns) {
					return model.Verdict{OK: true, Address: reservations.DNSTarget(host, d.Spec.Domain != "", d.Status.DNSRecords)}
				}
				other = d
			}
			if other != nil {
				return model.Verdict{Conflict: true, Message: fmt.Sprintf("host %s belongs to namespace %s (Domain %s): ask its owner to add namespace %s to spec.sharedWith, or choose another hostname",
					host, other.Namespace, other.Name, ns)}
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

// ready: Ready is True, or Unknown (reserved, and the edge cannot confirm
// it right now: stay published, fail static).
func ready(conds []metav1.Condition) bool {
	c := status.Find(conds, tunav1.ConditionReady)
	return c != nil && c.Status != metav1.ConditionFalse
}
