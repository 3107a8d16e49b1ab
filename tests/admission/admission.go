// Package admission lists the admission rules of the Tunnel, Domain and
// TCPEndpoint CRDs as cases: for each rule a spec that breaks it, the field
// the API server's error names and part of its message, next to specs that
// must stay accepted. One list serves two runners: the offline test of the
// committed CRDs (operator/api/v1alpha1, through the API server's own
// validation code) and the test against the real kube-apiserver
// (tests/e2e/admission_test.go). docs/resources.md lists the same rules.
package admission

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// Case is one spec to create, or one update from Old to Spec.
type Case struct {
	// Name says what the case shows.
	Name string
	// Old is the spec before an update, in YAML; empty for a create.
	Old string
	// Spec is the spec created (or updated to), in YAML; "-" leaves the
	// spec out.
	Spec string
	// Field is the field the API server's error names, e.g.
	// spec.upstream.url; empty for a spec the API server accepts.
	Field string
	// Message is part of the error message for that field.
	Message string
}

// Valid reports whether the API server accepts the case.
func (c Case) Valid() bool { return c.Field == "" }

// Object is the manifest of a kind with name and spec (YAML, or "-" for
// none), as kubectl would send it.
func Object(kind, name, spec string) (map[string]any, error) {
	obj := map[string]any{
		"apiVersion": "k8s.tuna.am/v1alpha1",
		"kind":       kind,
		"metadata":   map[string]any{"name": name},
	}
	if spec == "-" {
		return obj, nil
	}
	// JSON numbers become int64, as in the API server's decoder.
	j, err := yaml.YAMLToJSON([]byte(spec))
	if err != nil {
		return nil, fmt.Errorf("case spec %q: %w", spec, err)
	}
	var s map[string]any
	if err := json.Unmarshal(j, &s); err != nil {
		return nil, fmt.Errorf("case spec %q: %w", spec, err)
	}
	obj["spec"] = s
	return obj, nil
}

// Cases are the cases of every kind.
var Cases = map[string][]Case{
	"Tunnel":       Tunnel,
	"Domain":       Domain,
	"TCPEndpoint":  TCPEndpoint,
	"SecretSync":   SecretSync,
	"AccessPolicy": AccessPolicy,
}

// manyNamespaces is a YAML flow list body of n distinct namespace names.
func manyNamespaces(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("ns%d", i)
	}
	return strings.Join(names, ", ")
}
