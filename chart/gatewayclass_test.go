package chart

import (
	"testing"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The GatewayClass is off by default (the chart does not install the
// Gateway API CRDs it needs) and names the operator's controller when on.
func TestGatewayClass(t *testing.T) {
	if m := render(t, withKey(t)).Find("GatewayClass", "tuna"); m != nil {
		t.Fatal("a GatewayClass is rendered by default")
	}
	m := render(t, withKey(t, "gatewayClass.enabled=true")).Find("GatewayClass", "tuna")
	if m == nil {
		t.Fatal("gatewayClass.enabled=true renders no GatewayClass tuna")
	}
	var gc gwv1.GatewayClass
	if err := m.Into(&gc); err != nil {
		t.Fatal(err)
	}
	if gc.Spec.ControllerName != "k8s.tuna.am/gateway-controller" || gc.APIVersion != "gateway.networking.k8s.io/v1" {
		t.Errorf("GatewayClass %s controllerName %q", gc.APIVersion, gc.Spec.ControllerName)
	}
}
