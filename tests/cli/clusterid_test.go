package cli

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"code.tuna.am/tuna/k8s-operator/cli/pkg/cmd"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/report"
	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// A Domain with reclaimPolicy Retain keeps its reservation for a rebuilt
// cluster only if that cluster has the same cluster id: preflight warns
// while clusterID is left to the UID of kube-system, and passes once it is
// set.
func TestPreflightWarnsRetainWithoutClusterID(t *testing.T) {
	restoreChartCRDs(t)
	ctx := context.Background()
	ns := "retain-check"
	if _, err := env.CP.Namespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	d := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": tunav1.GroupVersion.String(), "kind": "Domain",
		"metadata": map[string]any{"name": "kept", "namespace": ns},
		"spec":     map[string]any{"subdomain": "kept-" + ns, "reclaimPolicy": "Retain"},
	}}
	res := env.dyn.Resource(tunav1.GroupVersion.WithResource("domains")).Namespace(ns)
	if _, err := res.Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Delete(context.Background(), "kept", metav1.DeleteOptions{}) })

	// The admin key is not bound, so clusterID may be left out.
	r := tuna(t, append([]string{"preflight", "-o", "json"}, append(edgeArgs(), "--set", "credentials.apiKey="+env.Edge.AdminKey)...)...)
	expectCode(t, r, cmd.ExitOK)
	c := check(t, decodeReport(t, r), "retained reservations survive a rebuild of the cluster")
	if c.Result != report.Warning || !strings.Contains(c.Error, "reclaimPolicy Retain on Domain "+ns+"/kept, but clusterID is not set") ||
		!strings.Contains(c.Hint, "set clusterID") || !strings.Contains(c.Hint, "tuna-edge owners transfer") {
		t.Fatalf("Retain without clusterID: %+v", c)
	}

	r = tuna(t, append([]string{"preflight", "-o", "json"}, valuesArgs(env.Edge.OperatorKey)...)...)
	expectCode(t, r, cmd.ExitOK)
	if c := check(t, decodeReport(t, r), "retained reservations survive"); c.Result != report.Success ||
		!strings.Contains(c.Detail, "clusterID="+harness.TestClusterID) {
		t.Fatalf("Retain with clusterID: %+v", c)
	}
}

// A key bound to an owner prefix must be bound to the clusterID the
// operator runs with, or the edge refuses every reservation it makes.
func TestPreflightOwnerPrefixMatchesClusterID(t *testing.T) {
	restoreChartCRDs(t)
	r := tuna(t, append([]string{"preflight", "-o", "json"}, valuesArgs(env.Edge.OperatorKey)...)...)
	expectCode(t, r, cmd.ExitOK)
	if c := check(t, decodeReport(t, r), "the API key acts for this cluster's owners"); c.Result != report.Success ||
		!strings.Contains(c.Detail, "bound to owner prefix "+harness.TestClusterID) {
		t.Fatalf("matching prefix: %+v", c)
	}
	for _, tc := range []struct {
		args      []string
		err, hint string
	}{
		{[]string{"--set", "clusterID=another"}, `bound to owner prefix "` + harness.TestClusterID + `", but clusterID is "another"`, "set clusterID=" + harness.TestClusterID},
		{nil, `bound to owner prefix "` + harness.TestClusterID + `", but clusterID is not set`, "set clusterID=" + harness.TestClusterID},
	} {
		args := append([]string{"preflight", "-o", "json"}, append(edgeArgs(), "--set", "credentials.apiKey="+env.Edge.OperatorKey)...)
		r := tuna(t, append(args, tc.args...)...)
		expectCode(t, r, cmd.ExitFailed)
		if c := check(t, decodeReport(t, r), "the API key acts for this cluster's owners"); c.Result != report.Error ||
			!strings.Contains(c.Error, tc.err) || !strings.HasPrefix(c.Hint, tc.hint) {
			t.Fatalf("%v: %+v", tc.args, c)
		}
	}
	k, err := env.Edge.Client(env.Edge.AdminKey).CreateAPIKey(context.Background(), apiwire.CreateAPIKey{Name: "unbound", Scopes: []string{apiwire.ScopeWrite}})
	if err != nil {
		t.Fatal(err)
	}
	r = tuna(t, append([]string{"preflight", "-o", "json"}, append(edgeArgs(), "--set", "credentials.apiKey="+k.Key)...)...)
	expectCode(t, r, cmd.ExitOK)
	if c := check(t, decodeReport(t, r), "the API key acts for this cluster's owners"); c.Result != report.Success ||
		!strings.Contains(c.Detail, "not bound to an owner prefix") {
		t.Fatalf("unbound key: %+v", c)
	}
}
