package loadbalancer

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/reservation"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/ingress"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/lbclass"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// PortState is how one port of the Service stands.
type PortState struct {
	Port corev1.ServicePort
	// Host is where the port is reached: an IP or a host name (for an HTTP
	// port of a custom Domain, the CNAME target its DNS record needs, as
	// for an Ingress). Empty: not known, or an address that is not ours
	// (AddressOwned, AddressTaken), and the port is left out of
	// status.loadBalancer.
	Host string
	// URL is the public address, once the port's Tunnel serves it.
	URL string
	// Reason and Message say why the port is not published; empty when it
	// is.
	Reason, Message string
}

// Published reports whether the port serves traffic.
func (s PortState) Published() bool { return s.Reason == "" }

// states reads each port's Tunnel (and TCPEndpoint or Domain) from the
// cache. The error is that of reading the edge's facts, without which
// ports whose Tunnel has no address yet have no host.
func (r *Reconciler) states(ctx context.Context, svc *corev1.Service, plans []PortPlan) ([]PortState, error) {
	var edge *apiwire.EdgeInfo
	info, infoErr := r.Info.Get(ctx)
	if infoErr == nil {
		edge = info
	}
	out := make([]PortState, 0, len(plans))
	for _, pl := range plans {
		st := PortState{Port: pl.Port}
		if pl.Problem != nil {
			st.Reason, st.Message = pl.Problem.Reason, pl.Problem.Message
			out = append(out, st)
			continue
		}
		var tun tunav1.Tunnel
		key := types.NamespacedName{Namespace: svc.Namespace, Name: pl.Tunnel.Name}
		if err := r.Client.Get(ctx, key, &tun); err != nil {
			st.Reason, st.Message = tunav1.ReasonConnecting, "waiting for Tunnel "+key.String()
		} else {
			st.URL = tun.Status.URL
			ready := status.Find(tun.Status.Conditions, tunav1.ConditionReady)
			switch {
			case ready == nil || ready.ObservedGeneration < tun.Generation:
				st.Reason, st.Message = tunav1.ReasonConnecting, "Tunnel "+key.String()+" is being set up"
			case ready.Status != metav1.ConditionTrue:
				st.Reason, st.Message = ready.Reason, ready.Message
			}
		}
		st.Host = r.host(ctx, svc.Namespace, pl, st.URL, edge)
		if st.Reason == tunav1.ReasonAddressOwned || st.Reason == tunav1.ReasonAddressTaken {
			st.Host = ""
		}
		out = append(out, st)
	}
	return out, infoErr
}

// host is where a port is reached, from its Tunnel's URL, its
// TCPEndpoint's address or Domain, or else the edge's facts.
func (r *Reconciler) host(ctx context.Context, namespace string, pl PortPlan, tunnelURL string, edge *apiwire.EdgeInfo) string {
	if pl.HTTP {
		if pl.Domain != "" {
			var d tunav1.Domain
			if err := r.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: pl.Domain}, &d); err != nil || d.Status.FQDN == "" {
				return ""
			}
			return reservation.DNSTarget(d.Status.FQDN, d.Spec.Domain != "", d.Status.DNSRecords)
		}
		if h := urlHost(tunnelURL); h != "" {
			return h
		}
		if edge != nil && edge.BaseDomain != "" {
			return pl.Tunnel.Spec.Subdomain + "." + edge.BaseDomain
		}
		return ""
	}
	key := types.NamespacedName{Namespace: namespace}
	if pl.Endpoint != nil {
		key.Name = pl.Endpoint.Name
	} else {
		key.Namespace, key.Name, _ = strings.Cut(pl.Picked, "/")
	}
	var ep tunav1.TCPEndpoint
	if err := r.Client.Get(ctx, key, &ep); err == nil && ep.Status.Address != "" {
		if h, _, err := net.SplitHostPort(ep.Status.Address); err == nil {
			return h
		}
	}
	if h := urlHost(tunnelURL); h != "" {
		return h
	}
	if edge != nil {
		return edge.TCPHost
	}
	return ""
}

func urlHost(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// ingressOf gathers the ports into status.loadBalancer.ingress: one entry
// per host, in the order of the Service's ports, each listing its ports
// with the reason of those not published as error. An IP host is an ip
// with ipMode Proxy: traffic to it must go out to the edge, not be
// short-cut by kube-proxy to the Service.
func ingressOf(states []PortState) []corev1.LoadBalancerIngress {
	var out []corev1.LoadBalancerIngress
	index := map[string]int{}
	for _, st := range states {
		if st.Host == "" {
			continue
		}
		i, ok := index[st.Host]
		if !ok {
			e := corev1.LoadBalancerIngress{Hostname: st.Host}
			if ip := net.ParseIP(st.Host); ip != nil {
				proxy := corev1.LoadBalancerIPModeProxy
				e = corev1.LoadBalancerIngress{IP: st.Host, IPMode: &proxy}
			}
			i = len(out)
			index[st.Host] = i
			out = append(out, e)
		}
		ps := corev1.PortStatus{Port: st.Port.Port, Protocol: corev1.ProtocolTCP}
		if !st.Published() {
			code := lbclass.ErrorPrefix + st.Reason
			ps.Error = &code
		}
		out[i].Ports = append(out[i].Ports, ps)
	}
	return out
}

func equalIngress(a, b []corev1.LoadBalancerIngress) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// report records an event when a port's state changes: Published with its
// address, or a Warning with the reason it is not (the normal wait for a
// key or a session shows no event).
func (r *Reconciler) report(svc *corev1.Service, states []PortState) {
	keep := map[string]bool{}
	for _, st := range states {
		subject := "port/" + strconv.Itoa(int(st.Port.Port))
		keep[subject] = true
		note := st.Reason + "|" + st.Message
		if st.Published() {
			note = "published|" + st.URL
		}
		waiting := st.Reason == tunav1.ReasonConnecting || st.Reason == tunav1.ReasonKeyPending
		if waiting || !r.notes.Set(svc, subject, note) {
			continue
		}
		if st.Published() {
			r.notes.Set(svc, "published", "yes")
			msg := fmt.Sprintf("port %s is published at %s", portName(st.Port), st.URL)
			r.Recorder.Eventf(svc, nil, corev1.EventTypeNormal, ReasonPublished, ingress.Action("Publish", subject, msg), "%s", msg)
			continue
		}
		msg := st.Message
		if !strings.HasPrefix(msg, "port ") {
			msg = fmt.Sprintf("port %s: %s", portName(st.Port), msg)
		}
		r.Recorder.Eventf(svc, nil, corev1.EventTypeWarning, st.Reason, ingress.Action("Publish", subject, msg), "%s", msg)
	}
	r.notes.Prune(svc, "port/", keep)
}
