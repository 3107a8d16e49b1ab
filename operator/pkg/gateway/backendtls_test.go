package gateway

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/upstream"
)

func policy(name string, targets []gwv1.LocalPolicyTargetReferenceWithSectionName, v gwv1.BackendTLSPolicyValidation) gwv1.BackendTLSPolicy {
	return gwv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name}, Spec: gwv1.BackendTLSPolicySpec{TargetRefs: targets, Validation: v}}
}

func target(svc string, section string) gwv1.LocalPolicyTargetReferenceWithSectionName {
	t := gwv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{Group: "", Kind: "Service", Name: gwv1.ObjectName(svc)}}
	if section != "" {
		t.SectionName = ptr(gwv1.SectionName(section))
	}
	return t
}

func TestBackendTLS(t *testing.T) {
	system := gwv1.WellKnownCACertificatesSystem
	policies := []gwv1.BackendTLSPolicy{
		policy("api-ca", []gwv1.LocalPolicyTargetReferenceWithSectionName{target("api", "")},
			gwv1.BackendTLSPolicyValidation{Hostname: "api.internal", CACertificateRefs: []gwv1.LocalObjectReference{{Kind: "ConfigMap", Name: "api-ca"}}}),
		policy("web-secret", []gwv1.LocalPolicyTargetReferenceWithSectionName{target("web", "https")},
			gwv1.BackendTLSPolicyValidation{Hostname: "web.internal", CACertificateRefs: []gwv1.LocalObjectReference{{Kind: "Secret", Name: "web-ca"}}}),
		policy("pub", []gwv1.LocalPolicyTargetReferenceWithSectionName{target("pub", "")},
			gwv1.BackendTLSPolicyValidation{Hostname: "pub.example", WellKnownCACertificates: &system}),
		policy("bad", []gwv1.LocalPolicyTargetReferenceWithSectionName{target("bad", "")},
			gwv1.BackendTLSPolicyValidation{Hostname: "bad", CACertificateRefs: []gwv1.LocalObjectReference{{Group: "example.com", Kind: "Bundle", Name: "x"}}}),
	}
	cases := []struct {
		name, ns, svc, port string
		found               bool
		want                upstream.TLSOptions
		problem             bool
	}{
		{"ConfigMap CA", "a", "api", "https", true, upstream.TLSOptions{ServerName: "api.internal", CA: &upstream.CARef{Kind: upstream.KindConfigMap, Name: "api-ca"}}, false},
		{"Secret CA on the named port", "a", "web", "https", true, upstream.TLSOptions{ServerName: "web.internal", CA: &upstream.CARef{Kind: upstream.KindSecret, Name: "web-ca"}}, false},
		{"another port of the Service", "a", "web", "admin", false, upstream.TLSOptions{}, false},
		{"system roots", "a", "pub", "", true, upstream.TLSOptions{ServerName: "pub.example"}, false},
		{"no policy", "a", "other", "", false, upstream.TLSOptions{}, false},
		{"another namespace's policy", "b", "api", "", false, upstream.TLSOptions{}, false},
		{"unsupported CA kind", "a", "bad", "", true, upstream.TLSOptions{ServerName: "bad"}, true},
	}
	for _, c := range cases {
		o, found, problem := BackendTLS(policies, c.ns, c.svc, c.port)
		if found != c.found || (problem != "") != c.problem || o.ServerName != c.want.ServerName ||
			(o.CA == nil) != (c.want.CA == nil) || (o.CA != nil && *o.CA != *c.want.CA) {
			t.Errorf("%s: %+v found=%v problem=%q, want %+v found=%v problem=%v", c.name, o, found, problem, c.want, c.found, c.problem)
		}
	}
}
