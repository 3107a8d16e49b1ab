package cluster

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/gatewayclass"
)

func TestGatewayStatus(t *testing.T) {
	hostname := gwv1.HostnameAddressType
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "gw"}, Status: gwv1.GatewayStatus{
		Addresses:  []gwv1.GatewayStatusAddress{{Type: &hostname, Value: "shop.example"}},
		Conditions: []metav1.Condition{{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "Programmed"}},
		Listeners: []gwv1.ListenerStatus{
			{Name: "ok", Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue}}},
			{Name: "taken", Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionFalse, Message: "host belongs to b"}}},
		},
	}}
	s := gatewayStatus(gw)
	if s.Ready != "True" || s.Address != "shop.example" || s.Message != "listener taken: host belongs to b" {
		t.Fatalf("%+v", s)
	}
}

func TestRouteStatus(t *testing.T) {
	ours := func(conds ...metav1.Condition) gwv1.RouteParentStatus {
		return gwv1.RouteParentStatus{ParentRef: gwv1.ParentReference{Name: "gw"}, ControllerName: gatewayclass.ControllerName, Conditions: conds}
	}
	ok := []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"}, {Type: "ResolvedRefs", Status: metav1.ConditionTrue, Reason: "ResolvedRefs"}}
	refused := []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"},
		{Type: "ResolvedRefs", Status: metav1.ConditionFalse, Reason: "RefNotPermitted", Message: "no ReferenceGrant"}}
	if s, found := routeStatus("HTTPRoute", "a", "r", []gwv1.RouteParentStatus{ours(ok...)}); !found || s.Ready != "True" || s.Address != "gateway/a/gw" {
		t.Fatalf("accepted route: %+v", s)
	}
	if s, _ := routeStatus("HTTPRoute", "a", "r", []gwv1.RouteParentStatus{ours(refused...)}); s.Ready != "False" || s.Reason != "RefNotPermitted" {
		t.Fatalf("refused route: %+v", s)
	}
	other := gwv1.RouteParentStatus{ParentRef: gwv1.ParentReference{Name: "x"}, ControllerName: "example.com/other"}
	if _, found := routeStatus("HTTPRoute", "a", "r", []gwv1.RouteParentStatus{other}); found {
		t.Fatal("a route only another controller reports on has a row")
	}
}
