package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/tests/admission"
)

// The admission rules of each kind (tests/admission) against the real
// kube-apiserver: every case is sent as kubectl sends it (strict field
// validation), with dry-run so that nothing reaches the operator. An update
// case creates its old object for real first, then patches it.

func TestTunnelAdmission(t *testing.T)       { runAdmission(t, "Tunnel") }
func TestDomainAdmission(t *testing.T)       { runAdmission(t, "Domain") }
func TestTCPEndpointAdmission(t *testing.T)  { runAdmission(t, "TCPEndpoint") }
func TestSecretSyncAdmission(t *testing.T)   { runAdmission(t, "SecretSync") }
func TestAccessPolicyAdmission(t *testing.T) { runAdmission(t, "AccessPolicy") }

func runAdmission(t *testing.T, kind string) {
	ctx := context.Background()
	ns := namespace(t)
	cases := admission.Cases[kind]
	require.NotEmpty(t, cases, "no admission cases for %s", kind)
	for i, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			name := fmt.Sprintf("case-%d", i)
			strict := client.FieldValidation("Strict")
			obj := object(t, kind, ns, name, c.Spec)
			var err error
			if c.Old == "" {
				err = env.CP.Client.Create(ctx, obj, client.DryRunAll, strict)
			} else {
				old := object(t, kind, ns, name, c.Old)
				require.NoError(t, env.CP.Client.Create(ctx, old, strict), "creating the object before the update")
				t.Cleanup(func() { deleteAndWait(t, object(t, kind, ns, name, c.Old), key(ns, name)) })
				// A JSON patch replacing the spec, as an edit would: it
				// carries no resourceVersion, so the operator's own writes
				// (finalizer, status) cannot turn it into a conflict.
				patch, jerr := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec", "value": obj.Object["spec"]}})
				require.NoError(t, jerr)
				err = env.CP.Client.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, patch), client.DryRunAll, strict)
			}
			if c.Valid() {
				require.NoError(t, err)
				return
			}
			require.Error(t, err, "want an error on %s containing %q", c.Field, c.Message)
			requireCause(t, err, c.Field, c.Message)
		})
	}
}

func object(t *testing.T, kind, ns, name, spec string) *unstructured.Unstructured {
	t.Helper()
	m, err := admission.Object(kind, name, spec)
	require.NoError(t, err)
	u := &unstructured.Unstructured{Object: m}
	u.SetNamespace(ns)
	return u
}

// requireCause checks that the apiserver's error names field and says msg.
// An invalid object carries one cause per field; a strict decoding error
// (an unknown field) carries none and names the field in its message.
func requireCause(t *testing.T, err error, field, msg string) {
	t.Helper()
	var se *apierrors.StatusError
	require.True(t, errors.As(err, &se), "not a status error: %v", err)
	if d := se.ErrStatus.Details; d != nil && len(d.Causes) > 0 {
		for _, c := range d.Causes {
			if c.Field == field && strings.Contains(c.Message, msg) {
				t.Logf("refused: %s: %s", c.Field, c.Message)
				return
			}
		}
		t.Fatalf("no cause on %s containing %q in %+v", field, msg, d.Causes)
	}
	require.Contains(t, se.ErrStatus.Message, field)
	require.Contains(t, se.ErrStatus.Message, msg)
	t.Logf("refused: %s", se.ErrStatus.Message)
}
