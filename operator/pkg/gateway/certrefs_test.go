package gateway

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"code.tuna.am/tuna/k8s-operator/tests/testca"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

// selfSigned is a certificate and its key in PEM, for secrets.
func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	ca, err := testca.New("test")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ca.Issue("mine.example")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err = testca.PEMFiles(c)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}

// The listener status of HTTPS listeners by their certificateRefs, as the
// conformance suite reads it (golden: testdata/certrefs.golden.yaml).
func TestCertificateRefsStatus(t *testing.T) {
	certPEM, keyPEM := selfSigned(t)
	tlsSecret := func(ns, name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}}
	}
	secrets := map[string]*corev1.Secret{
		"a/good":      tlsSecret("a", "good"),
		"certs/good":  tlsSecret("certs", "good"),
		"certs/other": tlsSecret("certs", "other"),
		"open/good":   tlsSecret("open", "good"),
		"a/malformed": {Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: []byte("Hello world\n"), corev1.TLSPrivateKeyKey: []byte("Hello world\n")}},
		"a/opaque":    {Type: corev1.SecretTypeOpaque, Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}},
	}
	lookup := func(ns, name string) (*corev1.Secret, error) {
		if ns == "hidden" {
			return nil, ErrSecretForbidden
		}
		return secrets[ns+"/"+name], nil
	}
	grants := []gwv1.ReferenceGrant{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "certs", Name: "specific"}, Spec: gwv1.ReferenceGrantSpec{
			From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "Gateway", Namespace: "a"}},
			To:   []gwv1.ReferenceGrantTo{{Kind: "Secret", Name: ptr(gwv1.ObjectName("good"))}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "open", Name: "all"}, Spec: gwv1.ReferenceGrantSpec{
			From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "Gateway", Namespace: "a"}},
			To:   []gwv1.ReferenceGrantTo{{Kind: "Secret"}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "hidden", Name: "all"}, Spec: gwv1.ReferenceGrantSpec{
			From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "Gateway", Namespace: "a"}},
			To:   []gwv1.ReferenceGrantTo{{Kind: "Secret"}}}},
		// Grants that do not let a Gateway of namespace a in.
		{ObjectMeta: metav1.ObjectMeta{Namespace: "certs", Name: "routes"}, Spec: gwv1.ReferenceGrantSpec{
			From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "a"}},
			To:   []gwv1.ReferenceGrantTo{{Kind: "Secret"}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "certs", Name: "services"}, Spec: gwv1.ReferenceGrantSpec{
			From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "Gateway", Namespace: "a"}},
			To:   []gwv1.ReferenceGrantTo{{Kind: "Service"}}}},
	}
	ref := func(ns, name string) gwv1.SecretObjectReference {
		r := gwv1.SecretObjectReference{Name: gwv1.ObjectName(name)}
		if ns != "" {
			r.Namespace = ptr(gwv1.Namespace(ns))
		}
		return r
	}
	https := func(name string, refs ...gwv1.SecretObjectReference) gwv1.Listener {
		l := gwv1.Listener{Name: gwv1.SectionName(name), Protocol: gwv1.HTTPSProtocolType, Port: 443, Hostname: hostname("mine.example")}
		if refs != nil {
			l.TLS = &gwv1.ListenerTLSConfig{CertificateRefs: refs}
		}
		return l
	}
	noHostname := func(l gwv1.Listener) gwv1.Listener { l.Hostname = nil; return l }
	wrongGroup, wrongKind := ref("", "good"), ref("", "good")
	wrongGroup.Group = ptr(gwv1.Group("wrong.group.example"))
	wrongKind.Kind = ptr(gwv1.Kind("WrongKind"))
	// One Gateway per listener: a Gateway publishes a host once.
	listeners := []gwv1.Listener{
		https("edge-certificate"),
		https("same-namespace", ref("", "good")),
		https("missing", ref("", "nope")),
		https("wrong-group", wrongGroup),
		https("wrong-kind", wrongKind),
		https("malformed", ref("", "malformed")),
		https("not-tls-type", ref("", "opaque")),
		https("other-namespace-no-grant", ref("certs", "other")),
		https("other-namespace-specific-grant", ref("certs", "good")),
		https("other-namespace-grant-all", ref("open", "good")),
		https("not-readable", ref("hidden", "good")),
		https("second-ref-missing", ref("", "good"), ref("", "nope")),
		noHostname(https("no-hostname", ref("", "nope"))),
	}
	type row struct {
		Listener   string   `json:"listener"`
		Conditions []string `json:"conditions"`
		Certs      []string `json:"certificates,omitempty"`
	}
	var got []row
	for _, spec := range listeners {
		gw := gateway(spec)
		r := res
		r.Certificates = func(l gwv1.Listener) CertVerdict {
			v, err := ResolveCertificateRefs(gw.Namespace, l, grants, lookup)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		l := Evaluate(gw, r)[0]
		if l.Programmed != (status(t, l, "Programmed").Status == metav1.ConditionTrue) {
			t.Errorf("%s: Programmed %v, condition %+v", l.Name, l.Programmed, status(t, l, "Programmed"))
		}
		rw := row{Listener: l.Name}
		for _, c := range l.Conditions {
			if c.ObservedGeneration != gw.Generation {
				t.Errorf("%s: %s has observedGeneration %d", l.Name, c.Type, c.ObservedGeneration)
			}
			rw.Conditions = append(rw.Conditions, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
		}
		for _, c := range l.Certs {
			rw.Certs = append(rw.Certs, c.Namespace+"/"+c.Name)
			if string(c.CertPEM) != string(certPEM) || string(c.KeyPEM) != string(keyPEM) {
				t.Errorf("%s: certificate %s/%s not the Secret's", l.Name, c.Namespace, c.Name)
			}
		}
		got = append(got, rw)
	}
	golden(t, "certrefs.golden.yaml", got)
}

// golden compares v, as YAML, with testdata/name (go test -update
// rewrites it).
func golden(t *testing.T, name string, v any) {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if string(want) != string(b) {
		t.Errorf("%s differs from what the code gives (go test -update rewrites it after a review):\n%s", path, b)
	}
}

// attachedRoutes counts the routes a listener selects, whatever the
// listener's own conditions (the conformance suite's
// GatewayWithAttachedRoutes: an HTTPS listener whose certificateRef names
// no Secret still counts its route), while the route is accepted only on
// an accepted listener.
func TestAttachedWhateverTheListener(t *testing.T) {
	all := gwv1.NamespacesFromAll
	gw := gateway(
		gwv1.Listener{Name: "tls", Protocol: gwv1.HTTPSProtocolType, Port: 443,
			TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "does-not-exist"}}}},
		gwv1.Listener{Name: "wild", Protocol: gwv1.HTTPProtocolType, Port: 80, Hostname: hostname("*.wildcard.example"),
			AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &all}}},
	)
	gws := Gateways{types.NamespacedName{Namespace: "a", Name: "gw"}: {Gateway: gw, Listeners: Evaluate(gw, res)}}
	cases := []struct {
		name      string
		hostnames []gwv1.Hostname
		ns        string
		attached  []string
	}{
		{"no hostnames", nil, "a", []string{"tls", "wild"}},
		{"a host below the wildcard", []gwv1.Hostname{"x.wildcard.example"}, "a", []string{"tls", "wild"}},
		{"a narrower wildcard", []gwv1.Hostname{"*.x.wildcard.example"}, "a", []string{"tls", "wild"}},
		{"the wildcard's own suffix", []gwv1.Hostname{"wildcard.example"}, "a", []string{"tls"}},
		{"another namespace", nil, "b", []string{"wild"}},
	}
	for _, c := range cases {
		ps := Attach(RouteInfo{Kind: "HTTPRoute", Namespace: c.ns, Hostnames: c.hostnames, Parents: []gwv1.ParentReference{{Name: "gw", Namespace: ptr(gwv1.Namespace("a"))}}}, gws)
		if len(ps) != 1 || fmt.Sprint(ps[0].Attached) != fmt.Sprint(c.attached) {
			t.Errorf("%s: attached to %v, want %v", c.name, ps[0].Attached, c.attached)
		}
		if ps[0].Accepted || len(ps[0].Listeners) != 0 {
			t.Errorf("%s: accepted on %v, whose listeners are not accepted", c.name, ps[0].Listeners)
		}
	}
}
