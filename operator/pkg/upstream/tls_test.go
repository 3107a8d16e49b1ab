package upstream

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"code.tuna.am/tuna/k8s-operator/tests/testca"
)

func TestParseCARef(t *testing.T) {
	for in, want := range map[string]CARef{
		"secret/web-tls":              {Kind: KindSecret, Name: "web-tls"},
		"ConfigMap/trust/bundle.pem":  {Kind: KindConfigMap, Name: "trust", Key: "bundle.pem"},
		" configmap/trust-bundle ":    {Kind: KindConfigMap, Name: "trust-bundle"},
		"secret/web.tls/tls_ca-1.crt": {Kind: KindSecret, Name: "web.tls", Key: "tls_ca-1.crt"},
	} {
		got, err := ParseCARef(in)
		if err != nil || got != want {
			t.Errorf("ParseCARef(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, mentions := range map[string]string{
		"web-tls":             "two or three parts",
		"pod/web-tls":         "secret or configmap",
		"secret/Web_TLS":      "the name",
		"secret/web/a/b":      "two or three parts",
		"secret/web/bad key!": "the key",
	} {
		if _, err := ParseCARef(in); err == nil || !strings.Contains(err.Error(), mentions) || !strings.Contains(err.Error(), "secret/NAME") {
			t.Errorf("ParseCARef(%q) = %v, want an error about %q that shows the form", in, err, mentions)
		}
	}
}

func TestTLSAnnotations(t *testing.T) {
	o, err := TLSAnnotations(map[string]string{
		"k8s.tuna.am/upstream-ca": "configmap/trust", "k8s.tuna.am/upstream-server-name": "web.example.internal", "other": "x",
	})
	if err != nil || o.CA == nil || *o.CA != (CARef{Kind: KindConfigMap, Name: "trust"}) || o.ServerName != "web.example.internal" || o.InsecureSkipVerify {
		t.Fatalf("TLSAnnotations = %+v, %v", o, err)
	}
	if o, err := TLSAnnotations(map[string]string{"k8s.tuna.am/upstream-insecure-skip-verify": "true"}); err != nil || !o.InsecureSkipVerify {
		t.Fatalf("skip: %+v, %v", o, err)
	}
	for name, ann := range map[string]map[string]string{
		"k8s.tuna.am/upstream-ca":                   {"k8s.tuna.am/upstream-ca": "web-tls"},
		"k8s.tuna.am/upstream-server-name":          {"k8s.tuna.am/upstream-server-name": "Web_Server"},
		"k8s.tuna.am/upstream-insecure-skip-verify": {"k8s.tuna.am/upstream-insecure-skip-verify": "yes"},
		"would be ignored":                          {"k8s.tuna.am/upstream-insecure-skip-verify": "true", "k8s.tuna.am/upstream-ca": "secret/web-tls"},
	} {
		_, err := TLSAnnotations(ann)
		var r *Refusal
		if !errors.As(err, &r) || r.Reason != ReasonTLS || !strings.Contains(r.Message, name) {
			t.Errorf("%v: %v, want a %s refusal naming %s", ann, err, ReasonTLS, name)
		}
	}
}

// The CA bundle is read from a Secret or a ConfigMap (data or binaryData)
// of the namespace; what is missing or unusable is a refusal that says
// what to fix. The server name defaults to the Service's cluster name.
func TestTLSSettings(t *testing.T) {
	ca, err := testca.New("test CA")
	if err != nil {
		t.Fatal(err)
	}
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: "team", Name: name} }
	reader := crfake.NewClientBuilder().WithScheme(s).WithObjects(
		&corev1.Secret{ObjectMeta: meta("web-tls"), Data: map[string][]byte{"ca.crt": ca.PEM}},
		&corev1.ConfigMap{ObjectMeta: meta("trust"), Data: map[string]string{"bundle.pem": string(ca.PEM)}},
		&corev1.ConfigMap{ObjectMeta: meta("binary"), BinaryData: map[string][]byte{"ca.crt": ca.PEM}},
		&corev1.ConfigMap{ObjectMeta: meta("junk"), Data: map[string]string{"ca.crt": "not PEM"}},
	).Build()
	web := Target{Scheme: "https", Host: "web", Service: "web", Namespace: "team", Port: 8443}
	ctx := context.Background()

	got, err := TLS(ctx, reader, "team", web, TLSOptions{})
	if err != nil || got.ServerName != "web.team.svc" || got.CA != nil || got.InsecureSkipVerify {
		t.Errorf("no options: %+v %v, want the system roots for web.team.svc", got, err)
	}
	ext, err := TLS(ctx, reader, "team", Target{Scheme: "https", Host: "api.example.com", Port: 443}, TLSOptions{})
	if err != nil || ext.ServerName != "api.example.com" {
		t.Errorf("external host: %+v %v, want its own name", ext, err)
	}
	for _, ref := range []CARef{{Kind: KindSecret, Name: "web-tls"}, {Kind: KindConfigMap, Name: "trust", Key: "bundle.pem"}, {Kind: KindConfigMap, Name: "binary"}} {
		got, err := TLS(ctx, reader, "team", web, TLSOptions{CA: &ref, ServerName: "web.example.internal"})
		if err != nil || string(got.CA) != string(ca.PEM) || got.ServerName != "web.example.internal" {
			t.Errorf("%s: %+v %v", ref, got, err)
		}
	}
	for mentions, ref := range map[string]CARef{
		"Secret team/gone does not exist": {Kind: KindSecret, Name: "gone"},
		"has no key tls.crt":              {Kind: KindSecret, Name: "web-tls", Key: "tls.crt"},
		"no PEM certificate":              {Kind: KindConfigMap, Name: "junk"},
	} {
		_, err := TLS(ctx, reader, "team", web, TLSOptions{CA: &ref})
		var r *Refusal
		if !errors.As(err, &r) || r.Reason != ReasonTLS || !strings.Contains(r.Message, mentions) {
			t.Errorf("%s: %v, want a %s refusal mentioning %q", ref, err, ReasonTLS, mentions)
		}
	}
}

func TestAppScheme(t *testing.T) {
	for in, want := range map[string]string{"": "", "kubernetes.io/h2c": SchemeH2C, "H2C": SchemeH2C,
		"https": "https", "kubernetes.io/wss": "https", "http": "", "kubernetes.io/ws": ""} {
		p := &corev1.ServicePort{}
		if in != "" {
			p.AppProtocol = &in
		}
		if got := AppScheme(p); got != want {
			t.Errorf("appProtocol %q: %q, want %q", in, got, want)
		}
	}
	if AppScheme(nil) != "" {
		t.Error("no port: no opinion")
	}
}
