package upstream

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

func ptr[T any](v T) *T { return &v }

// A headless Service's port is dialed at a ready endpoint of its slices,
// at the slice port of the Service port's name and protocol.
func TestPickEndpoint(t *testing.T) {
	slice := func(typ discoveryv1.AddressType, portName string, port int32, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
		return discoveryv1.EndpointSlice{AddressType: typ, Endpoints: eps,
			Ports: []discoveryv1.EndpointPort{{Name: ptr(portName), Port: ptr(port), Protocol: ptr(corev1.ProtocolTCP)}}}
	}
	ep := func(ready *bool, addrs ...string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: addrs, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	}
	web := corev1.ServicePort{Name: "first-port", Port: 8080}
	cases := []struct {
		name   string
		slices []discoveryv1.EndpointSlice
		port   corev1.ServicePort
		want   string
	}{
		{"the lowest ready address, at the slice's port", []discoveryv1.EndpointSlice{
			slice(discoveryv1.AddressTypeIPv4, "first-port", 3000, ep(ptr(true), "10.0.0.9"), ep(ptr(true), "10.0.0.7")),
		}, web, "10.0.0.7:3000"},
		{"not ready is skipped, unknown readiness is ready", []discoveryv1.EndpointSlice{
			slice(discoveryv1.AddressTypeIPv4, "first-port", 3000, ep(ptr(false), "10.0.0.1"), ep(nil, "10.0.0.2")),
		}, web, "10.0.0.2:3000"},
		{"an empty IPv6 slice beside the IPv4 one", []discoveryv1.EndpointSlice{
			slice(discoveryv1.AddressTypeIPv6, "first-port", 3000),
			slice(discoveryv1.AddressTypeIPv4, "first-port", 3000, ep(ptr(true), "10.0.0.3")),
		}, web, "10.0.0.3:3000"},
		{"IPv6 address", []discoveryv1.EndpointSlice{
			slice(discoveryv1.AddressTypeIPv6, "first-port", 3000, ep(ptr(true), "fd00::1")),
		}, web, "[fd00::1]:3000"},
		{"another port name", []discoveryv1.EndpointSlice{
			slice(discoveryv1.AddressTypeIPv4, "metrics", 9090, ep(ptr(true), "10.0.0.1")),
		}, web, ""},
		{"an unnamed Service port takes the unnamed slice port", []discoveryv1.EndpointSlice{
			slice(discoveryv1.AddressTypeIPv4, "", 3000, ep(ptr(true), "10.0.0.1")),
		}, corev1.ServicePort{Port: 80}, "10.0.0.1:3000"},
		{"FQDN slices are not dialed", []discoveryv1.EndpointSlice{
			slice(discoveryv1.AddressTypeFQDN, "first-port", 3000, ep(ptr(true), "db.example")),
		}, web, ""},
		{"no ready endpoint", []discoveryv1.EndpointSlice{
			slice(discoveryv1.AddressTypeIPv4, "first-port", 3000, ep(ptr(false), "10.0.0.1")),
		}, web, ""},
		{"UDP port of the same name", []discoveryv1.EndpointSlice{
			{AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{ep(nil, "10.0.0.1")},
				Ports: []discoveryv1.EndpointPort{{Name: ptr("first-port"), Port: ptr(int32(53)), Protocol: ptr(corev1.ProtocolUDP)}}},
		}, web, ""},
	}
	for _, c := range cases {
		if got := PickEndpoint(c.slices, c.port); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
