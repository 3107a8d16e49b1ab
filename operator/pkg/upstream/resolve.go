package upstream

import (
	"context"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Resolve turns a target into the address to dial: the Service's ClusterIP
// and port, as kube-proxy would route it; for a headless Service (no
// ClusterIP), one of its ready endpoints (headlessEndpoint). External
// targets (allowed by Parse only when external upstreams are on) dial
// their host directly. reader needs `get` on Services, and `list` on
// EndpointSlices for headless ones.
func Resolve(ctx context.Context, reader client.Reader, namespace string, t Target, allowExternal bool) (string, error) {
	addr, _, err := ResolvePort(ctx, reader, namespace, t, allowExternal)
	return addr, err
}

// ResolvePort is Resolve that also returns the Service port it chose (nil
// for external hosts and ExternalName Services), whose appProtocol tells
// how to speak to it.
func ResolvePort(ctx context.Context, reader client.Reader, namespace string, t Target, allowExternal bool) (string, *corev1.ServicePort, error) {
	r, err := ResolveService(ctx, reader, namespace, t, allowExternal)
	return r.Addr, r.Port, err
}

// Resolution is where a target is dialed.
type Resolution struct {
	Addr string
	// Port is the Service port chosen (nil for external hosts and
	// ExternalName Services).
	Port *corev1.ServicePort
	// Endpoint: Addr is an endpoint of a headless Service, from its
	// EndpointSlices, which the caller should watch to dial another when
	// they change.
	Endpoint bool
	// Missing: the Service does not exist (yet). Its EndpointSlices tell
	// a caller that may not watch Services when it does: the EndpointSlice
	// controller makes one as a Service with a selector is created, and
	// whoever writes a selectorless Service's slices by hand labels them
	// with its name.
	Missing bool
}

// FollowsSlices says whether the caller should resolve the target again
// when the Service's EndpointSlices change: its endpoint may have gone, or
// the Service may have come.
func (r Resolution) FollowsSlices() bool { return r.Endpoint || r.Missing }

// ResolveService is ResolvePort that also says whether the address is a
// headless Service's endpoint. reader needs `list` on EndpointSlices for
// those.
func ResolveService(ctx context.Context, reader client.Reader, namespace string, t Target, allowExternal bool) (Resolution, error) {
	if t.Service == "" {
		return Resolution{Addr: net.JoinHostPort(t.Host, strconv.Itoa(int(t.Port)))}, nil
	}
	if t.Namespace != "" {
		namespace = t.Namespace
	}
	var svc corev1.Service
	if err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: t.Service}, &svc); err != nil {
		if apierrors.IsNotFound(err) {
			return Resolution{Missing: true}, &Refusal{Reason: ReasonNotFound, Message: fmt.Sprintf(
				"Service %s/%s does not exist: create it or fix upstream.url", namespace, t.Service)}
		}
		return Resolution{}, fmt.Errorf("reading Service %s/%s: %w", namespace, t.Service, err)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		if !allowExternal {
			return Resolution{}, refuse("upstream Service %s/%s is of type ExternalName (%s): it points outside the namespace; set agentManager.allowExternalUpstreams=true in the chart to allow it",
				namespace, t.Service, svc.Spec.ExternalName)
		}
		port := t.Port
		if t.PortName != "" {
			return Resolution{}, &Refusal{Reason: ReasonInvalid, Message: fmt.Sprintf("ExternalName Service %s/%s has no named ports: use a port number", namespace, t.Service)}
		}
		return Resolution{Addr: net.JoinHostPort(svc.Spec.ExternalName, strconv.Itoa(int(port)))}, nil
	}
	for i, p := range svc.Spec.Ports {
		if (t.PortName != "" && p.Name == t.PortName) || (t.PortName == "" && p.Port == t.Port) {
			if ip := svc.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
				return Resolution{Addr: net.JoinHostPort(ip, strconv.Itoa(int(p.Port))), Port: &svc.Spec.Ports[i]}, nil
			}
			addr, err := headlessEndpoint(ctx, reader, &svc, p)
			return Resolution{Addr: addr, Port: &svc.Spec.Ports[i], Endpoint: true}, err
		}
	}
	return Resolution{}, &Refusal{Reason: ReasonNotFound, Message: fmt.Sprintf(
		"Service %s/%s has no port %s: use one of its ports %s", namespace, t.Service, t.PortString(), portList(svc.Spec.Ports))}
}

func portList(ports []corev1.ServicePort) string {
	s := ""
	for i, p := range ports {
		if i > 0 {
			s += ", "
		}
		s += strconv.Itoa(int(p.Port))
		if p.Name != "" {
			s += " (" + p.Name + ")"
		}
	}
	if s == "" {
		return "(none)"
	}
	return s
}
