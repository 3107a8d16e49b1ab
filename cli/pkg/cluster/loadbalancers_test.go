package cluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A LoadBalancer Service's status row: Ready when every TCP port is
// listed without an error (UDP ports are never published and do not
// count), False with the first port's error, Unknown while ports wait.
func TestLoadBalancerStatus(t *testing.T) {
	owned := "k8s.tuna.am/AddressOwned"
	svc := func(ingress ...corev1.LoadBalancerIngress) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Port: 5432}, {Port: 80, Protocol: corev1.ProtocolTCP}, {Port: 53, Protocol: corev1.ProtocolUDP}}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: ingress}}}
	}
	tcp := corev1.LoadBalancerIngress{IP: "203.0.113.7", Ports: []corev1.PortStatus{{Port: 5432}}}
	web := corev1.LoadBalancerIngress{Hostname: "team-db.a.example", Ports: []corev1.PortStatus{{Port: 80}}}
	bad := corev1.LoadBalancerIngress{Hostname: "team-db.a.example", Ports: []corev1.PortStatus{{Port: 80, Error: &owned}}}
	for name, c := range map[string]struct {
		svc                    *corev1.Service
		ready, reason, address string
	}{
		"published": {svc(tcp, web), "True", "Published", "203.0.113.7 (5432), team-db.a.example (80)"},
		"failed":    {svc(tcp, bad), "False", "AddressOwned", "203.0.113.7 (5432), team-db.a.example (80)"},
		"waiting":   {svc(tcp), "Unknown", "Pending", "203.0.113.7 (5432)"},
		"nothing":   {svc(), "Unknown", "Pending", ""},
	} {
		got := loadBalancerStatus(c.svc)
		if got.Kind != KindLoadBalancer || got.Ready != c.ready || got.Reason != c.reason || got.Address != c.address {
			t.Errorf("%s: %+v, want %s %s at %q", name, got, c.ready, c.reason, c.address)
		}
	}
	if m := loadBalancerStatus(svc(tcp)).Message; m != "not published yet: port 80 (kubectl describe service db says why)" {
		t.Errorf("message %q", m)
	}
}
