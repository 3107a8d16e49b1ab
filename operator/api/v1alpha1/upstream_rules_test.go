package v1alpha1_test

import (
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/upstream"
)

// The CEL rules of spec.upstream.url restate in the CRD what the agent's
// parser (operator/pkg/upstream) refuses. This test builds upstream URLs
// from pieces and checks both ways: every URL the parser refuses whatever
// the cluster holds (external upstreams allowed, so only the URL itself
// decides) is refused at admission, and every URL admission refuses is
// refused by the parser too, except for the few forms listed in
// stricterPieces, which admission refuses on purpose.
func TestUpstreamRulesAgreeWithAgent(t *testing.T) {
	v := newValidator(t, "Tunnel")
	schemes := []string{"http://", "https://", "h2c://", "tcp://", "ftp://", "HTTP://", ""}
	hosts := []string{"web", "web.", "web.team", "web.team.svc", "web.team.svc.cluster.local", "web.other.svc",
		"10.0.0.1", "[2001:db8::1]", "2001:db8::1", "example.com", "api.example.com", "Web", "my_web",
		"u@web", "", "[]", "[2001:db8::1"}
	ports := []string{"", ":", ":0", ":1", ":080", ":8080", ":65535", ":65536", ":99999999999",
		":http", ":HTTP", ":my--port", ":a-very-long-port-name", ":80-81", ":-http", ":+80", ":http:80"}
	suffixes := []string{"", "/", "//", "/app", "?a=b", "#x", " "}
	// Forms the parser takes but admission refuses: an IPv6 address
	// without brackets or with an unclosed one and a second ':' (admission
	// asks for brackets so that the port is never ambiguous), a port with a
	// '+' sign, and a trailing space.
	stricterPieces := map[string]bool{"2001:db8::1": true, "[2001:db8::1": true, ":+80": true, ":http:80": true, " ": true}
	// A named port on NAME.NAMESPACE is served only when NAMESPACE is the
	// Tunnel's own, which a CRD rule cannot see (CEL reads no
	// metadata.namespace): the agent decides, so these are not compared.
	namespaceDependent := func(host, port string) bool {
		h := strings.TrimSuffix(host, ".")
		return strings.Count(h, ".") == 1 && !strings.HasSuffix(h, ".team") && strings.ContainsAny(port, "abcdefghijklmnopqrstuvwxyz")
	}

	checked := 0
	for _, scheme := range schemes {
		protocol := "http"
		if scheme == "tcp://" {
			protocol = "tcp"
		}
		for _, host := range hosts {
			for _, port := range ports {
				for _, suffix := range suffixes {
					raw := scheme + host + port + suffix
					_, err := upstream.Parse(raw, protocol, "team", true)
					admitted := urlAdmitted(t, v, protocol, raw)
					checked++
					switch {
					case namespaceDependent(host, port):
					case err != nil && admitted:
						t.Errorf("%s tunnel, upstream.url %q: admitted, but the agent refuses it: %v", protocol, raw, err)
					case err == nil && !admitted && !stricterPieces[host] && !stricterPieces[port] && !stricterPieces[suffix]:
						t.Errorf("%s tunnel, upstream.url %q: refused at admission, but the agent serves it", protocol, raw)
					}
				}
			}
		}
	}
	t.Logf("%d upstream URLs checked", checked)
}

// urlAdmitted reports whether the API server takes a Tunnel of protocol
// with upstream.url raw, as far as upstream.url is concerned.
func urlAdmitted(t *testing.T, v *crdValidator, protocol, raw string) bool {
	t.Helper()
	spec := map[string]any{"protocol": protocol, "upstream": map[string]any{"url": raw}}
	if protocol == "tcp" {
		spec["portOrAlias"] = "postgres"
	} else {
		spec["subdomain"] = "my-app"
	}
	obj := map[string]any{"apiVersion": "k8s.tuna.am/v1alpha1", "kind": "Tunnel", "metadata": map[string]any{"name": "x"}, "spec": spec}
	for _, e := range v.validate(obj, nil) {
		if strings.HasPrefix(e.Field, "spec.upstream.url") {
			return false
		}
		t.Fatalf("upstream.url %q: unexpected error %v", raw, e)
	}
	return true
}
