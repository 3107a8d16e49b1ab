package gateway

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/tests/testca"
)

// Only programmed HTTPS listeners with certificates claim a certificate
// for their host, the oldest Gateway's first; a listener's certificate is
// the first of its refs that names the host. A listener without a
// hostname claims the Gateway's own address with its first certificate,
// whatever it names (clients reach the address by names of their own).
func TestCertificateClaims(t *testing.T) {
	ca, err := testca.New("test")
	if err != nil {
		t.Fatal(err)
	}
	issue := func(name string) Certificate {
		c, err := ca.Issue(name)
		if err != nil {
			t.Fatal(err)
		}
		certPEM, keyPEM, err := testca.PEMFiles(c)
		if err != nil {
			t.Fatal(err)
		}
		return Certificate{Name: name, CertPEM: certPEM, KeyPEM: keyPEM}
	}
	other, shop := issue("other.example"), issue("shop.example")
	https := func(name, host string, certs ...Certificate) Listener {
		return Listener{Name: name, Protocol: gwv1.HTTPSProtocolType, Host: host, Accepted: true, Programmed: true, Certs: certs}
	}
	older := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "old"}}
	younger := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "new"}}
	notProgrammed := https("broken", "shop.example", shop)
	notProgrammed.Programmed = false
	address := https("address", "192.0.2.1", other, shop)
	address.AnyHost = true
	plain := https("plain", "shop.example", shop)
	plain.Protocol = gwv1.HTTPProtocolType
	ev := Gateways{
		{Namespace: "a", Name: "new"}: {Gateway: younger, Listeners: []Listener{https("first", "shop.example", other, shop), notProgrammed, address, plain,
			https("wrong", "shop.example", other), https("none", "shop.example")}},
		{Namespace: "b", Name: "old"}: {Gateway: older, Listeners: []Listener{https("web", "shop.example", shop)}},
	}
	got := CertificateClaims([]*gwv1.Gateway{older, younger}, ev)
	if len(got) != 2 {
		t.Fatalf("hosts %v", got)
	}
	if a := got["192.0.2.1"]; len(a) != 1 || a[0].Listener != "address" || a[0].Cert == nil || a[0].Cert.Name != "other.example" {
		t.Fatalf("the Gateway address's claims: %+v", a)
	}
	claims := got["shop.example"]
	var names []string
	for _, c := range claims {
		names = append(names, c.Gateway.String()+"/"+c.Listener)
	}
	if want := []string{"b/old/web", "a/new/first", "a/new/wrong"}; len(names) != len(want) || names[0] != want[0] || names[1] != want[1] || names[2] != want[2] {
		t.Fatalf("claims %v, want %v", names, want)
	}
	if claims[1].Cert == nil || claims[1].Cert.Name != "shop.example" || claims[1].Namespace != "a" {
		t.Fatalf("the first listener's certificate for the host: %+v", claims[1].Cert)
	}
	if claims[2].Cert != nil {
		t.Fatalf("a certificate for another name was chosen: %s", claims[2].Cert.Name)
	}
}
