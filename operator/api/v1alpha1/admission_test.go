package v1alpha1_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"code.tuna.am/tuna/k8s-operator/tests/admission"
)

// The admission rules of each kind (tests/admission), run through the API
// server's validation code against the committed CRDs. tests/e2e runs the
// same cases against a real kube-apiserver.

func TestTunnelAdmission(t *testing.T)       { runAdmission(t, "Tunnel") }
func TestDomainAdmission(t *testing.T)       { runAdmission(t, "Domain") }
func TestTCPEndpointAdmission(t *testing.T)  { runAdmission(t, "TCPEndpoint") }
func TestSecretSyncAdmission(t *testing.T)   { runAdmission(t, "SecretSync") }
func TestAccessPolicyAdmission(t *testing.T) { runAdmission(t, "AccessPolicy") }

func runAdmission(t *testing.T, kind string) {
	v := newValidator(t, kind)
	cases := admission.Cases[kind]
	if len(cases) == 0 {
		t.Fatalf("no admission cases for %s", kind)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			var old map[string]any
			if c.Old != "" {
				o, err := admission.Object(kind, "x", c.Old)
				if err != nil {
					t.Fatal(err)
				}
				if errs := v.validate(runtime.DeepCopyJSON(o), nil); len(errs) > 0 {
					t.Fatalf("the object before the update is refused: %v", errs.ToAggregate())
				}
				old = o
			}
			obj, err := admission.Object(kind, "x", c.Spec)
			if err != nil {
				t.Fatal(err)
			}
			errs := v.validate(obj, old)
			if c.Valid() {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs.ToAggregate())
				}
				return
			}
			if !namesField(errs, c.Field, c.Message) {
				t.Fatalf("want an error on %s containing %q, got: %v", c.Field, c.Message, errs.ToAggregate())
			}
			t.Logf("refused: %v", errs.ToAggregate())
		})
	}
}

// namesField reports whether one of errs is about path and says msg.
func namesField(errs field.ErrorList, path, msg string) bool {
	for _, e := range errs {
		if e.Field == path && strings.Contains(e.Error(), msg) {
			return true
		}
	}
	return false
}
