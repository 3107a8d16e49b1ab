package upstream

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// headlessEndpoint is where a headless Service's port is dialed: there is
// no ClusterIP for kube-proxy to balance, so the agent picks one ready
// endpoint of the Service's EndpointSlices (the ones its selector makes,
// or hand-made ones labelled kubernetes.io/service-name), as a client
// resolving the Service's DNS name would.
func headlessEndpoint(ctx context.Context, reader client.Reader, svc *corev1.Service, port corev1.ServicePort) (string, error) {
	var list discoveryv1.EndpointSliceList
	if err := reader.List(ctx, &list, client.InNamespace(svc.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name}); err != nil {
		return "", fmt.Errorf("listing the EndpointSlices of headless Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	if addr := PickEndpoint(list.Items, port); addr != "" {
		return addr, nil
	}
	return "", &Refusal{Reason: ReasonNotFound, Message: fmt.Sprintf(
		"Service %s/%s is headless (no ClusterIP) and no EndpointSlice of it has a ready endpoint for port %s: check its Pods or its EndpointSlices",
		svc.Namespace, svc.Name, portString(port))}
}

// PickEndpoint chooses the endpoint of a Service port among its
// EndpointSlices: a ready endpoint (an unknown readiness counts as ready,
// as the API says) of an IPv4 or IPv6 slice whose port has the Service
// port's name and protocol, the lowest address first so that every
// resolution picks the same one while it stays ready. "" when none.
func PickEndpoint(eps []discoveryv1.EndpointSlice, port corev1.ServicePort) string {
	proto := port.Protocol
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	var found []string
	for _, s := range eps {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		target := int32(-1)
		for _, p := range s.Ports {
			name, pp := "", corev1.ProtocolTCP
			if p.Name != nil {
				name = *p.Name
			}
			if p.Protocol != nil {
				pp = *p.Protocol
			}
			if name == port.Name && pp == proto && p.Port != nil {
				target = *p.Port
			}
		}
		if target < 0 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				if net.ParseIP(a) != nil {
					found = append(found, net.JoinHostPort(a, strconv.Itoa(int(target))))
				}
			}
		}
	}
	if len(found) == 0 {
		return ""
	}
	return slices.Min(found)
}

func portString(p corev1.ServicePort) string {
	if p.Name != "" {
		return fmt.Sprintf("%d (%s)", p.Port, p.Name)
	}
	return strconv.Itoa(int(p.Port))
}
