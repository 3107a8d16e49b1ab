package gateway

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

func readyConds(s metav1.ConditionStatus) []metav1.Condition {
	return []metav1.Condition{{Type: tunav1.ConditionReady, Status: s, Reason: "x"}}
}

// A Gateway's namespace may publish its own reservations and those shared
// with it; another namespace's is a conflict; a reservation that is not
// Ready does not count.
func TestReserved(t *testing.T) {
	domains := []tunav1.Domain{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "mine"}, Status: tunav1.DomainStatus{FQDN: "mine.example", Conditions: readyConds(metav1.ConditionTrue)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "shared"}, Spec: tunav1.DomainSpec{SharedWith: []string{"a"}},
			Status: tunav1.DomainStatus{FQDN: "shared.example", Conditions: readyConds(metav1.ConditionUnknown)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "theirs"}, Status: tunav1.DomainStatus{FQDN: "theirs.example", Conditions: readyConds(metav1.ConditionTrue)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "failed"}, Status: tunav1.DomainStatus{FQDN: "failed.example", Conditions: readyConds(metav1.ConditionFalse)}},
	}
	endpoints := []tunav1.TCPEndpoint{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "db"}, Status: tunav1.TCPEndpointStatus{Port: 30001, Address: "edge:30001", Conditions: readyConds(metav1.ConditionTrue)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "other"}, Status: tunav1.TCPEndpointStatus{Port: 30002, Conditions: readyConds(metav1.ConditionTrue)}},
	}
	res := reserved("a", domains, endpoints, edgeRules{})
	hosts := []struct {
		host         string
		ok, conflict bool
	}{
		{"mine.example", true, false},
		{"shared.example", true, false},
		{"theirs.example", false, true},
		{"failed.example", false, false},
		{"nobody.example", false, false},
	}
	for _, c := range hosts {
		v := res.Host(c.host)
		if v.OK != c.ok || v.Conflict != c.conflict || (!v.OK && v.Message == "") {
			t.Errorf("%s: %+v", c.host, v)
		}
	}
	if v := res.Port(30001); !v.OK || v.Address != "edge:30001" {
		t.Errorf("own port: %+v", v)
	}
	if v := res.Port(30002); v.OK || !v.Conflict {
		t.Errorf("another namespace's port: %+v", v)
	}
	if v := res.Port(30003); v.OK || v.Conflict {
		t.Errorf("unreserved port: %+v", v)
	}
}

// A listener without a hostname is published on the Gateway's own
// address, HTTP on the edge's Gateway HTTP port and HTTPS on its HTTPS
// port; an edge without HTTPS publishes no HTTPS listener there, and says
// so.
func TestGatewayAddressPorts(t *testing.T) {
	withHTTPS := reserved("a", nil, nil, edgeRules{own: "192.0.2.1", pool: 1, port: 80, httpsPort: 443})
	for _, c := range []struct {
		protocol gwv1.ProtocolType
		port     int32
		ok       bool
	}{
		{gwv1.HTTPProtocolType, 80, true},
		{gwv1.HTTPSProtocolType, 443, true},
		{gwv1.HTTPProtocolType, 443, false},
		{gwv1.HTTPSProtocolType, 80, false},
	} {
		if v := withHTTPS.Address(c.protocol, c.port); v.OK != c.ok || (v.OK && v.Address != "192.0.2.1") || (!v.OK && !strings.Contains(v.Message, "set port to")) {
			t.Errorf("%s on port %d: %+v", c.protocol, c.port, v)
		}
	}
	httpOnly := reserved("a", nil, nil, edgeRules{own: "192.0.2.1", pool: 1, port: 80})
	if v := httpOnly.Address(gwv1.HTTPSProtocolType, 443); v.OK || !strings.Contains(v.Message, "HTTP only") {
		t.Errorf("HTTPS on an edge without HTTPS: %+v", v)
	}
}
