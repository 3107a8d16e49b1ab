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
// and port, as kube-proxy would route it. External targets (allowed by
// Parse only when external upstreams are on) dial their host directly. reader
// needs only `get` on Services.
func Resolve(ctx context.Context, reader client.Reader, namespace string, t Target, allowExternal bool) (string, error) {
	addr, _, err := ResolvePort(ctx, reader, namespace, t, allowExternal)
	return addr, err
}

// ResolvePort is Resolve that also returns the Service port it chose (nil
// for external hosts and ExternalName Services), whose appProtocol tells
// how to speak to it.
func ResolvePort(ctx context.Context, reader client.Reader, namespace string, t Target, allowExternal bool) (string, *corev1.ServicePort, error) {
	if t.Service == "" {
		return net.JoinHostPort(t.Host, strconv.Itoa(int(t.Port))), nil, nil
	}
	if t.Namespace != "" {
		namespace = t.Namespace
	}
	var svc corev1.Service
	if err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: t.Service}, &svc); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil, &Refusal{Reason: ReasonNotFound, Message: fmt.Sprintf(
				"Service %s/%s does not exist: create it or fix upstream.url", namespace, t.Service)}
		}
		return "", nil, fmt.Errorf("reading Service %s/%s: %w", namespace, t.Service, err)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		if !allowExternal {
			return "", nil, refuse("upstream Service %s/%s is of type ExternalName (%s): it points outside the namespace; set agentManager.allowExternalUpstreams=true in the chart to allow it",
				namespace, t.Service, svc.Spec.ExternalName)
		}
		port := t.Port
		if t.PortName != "" {
			return "", nil, &Refusal{Reason: ReasonInvalid, Message: fmt.Sprintf("ExternalName Service %s/%s has no named ports: use a port number", namespace, t.Service)}
		}
		return net.JoinHostPort(svc.Spec.ExternalName, strconv.Itoa(int(port))), nil, nil
	}
	ip := svc.Spec.ClusterIP
	if ip == "" || ip == corev1.ClusterIPNone {
		return "", nil, &Refusal{Reason: ReasonNotFound, Message: fmt.Sprintf(
			"Service %s/%s is headless (no ClusterIP): give it a ClusterIP to publish it", namespace, t.Service)}
	}
	for i, p := range svc.Spec.Ports {
		if (t.PortName != "" && p.Name == t.PortName) || (t.PortName == "" && p.Port == t.Port) {
			return net.JoinHostPort(ip, strconv.Itoa(int(p.Port))), &svc.Spec.Ports[i], nil
		}
	}
	return "", nil, &Refusal{Reason: ReasonNotFound, Message: fmt.Sprintf(
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
