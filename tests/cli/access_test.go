package cli

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"code.tuna.am/tuna/k8s-operator/cli/pkg/cluster"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/cmd"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/report"
	"code.tuna.am/tuna/k8s-operator/edge/access/link"
)

// The CLI knows AccessPolicies: `access link` signs a link with the key of
// the policy's links Secret that the edge will check; `status` lists the
// policies with the addresses they guard and Accepted; `preflight` names
// a Secret a policy needs and lacks.
func TestAccessPolicyInTheCLI(t *testing.T) {
	restoreChartCRDs(t)
	ctx := context.Background()
	if _, err := env.CP.Namespace(ctx, "reports"); err != nil {
		t.Fatal(err)
	}
	key := []byte(strings.Repeat("s", 32))
	if _, err := env.kube.CoreV1().Secrets("reports").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "share-key"},
		Data: map[string][]byte{"key": key}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policy := func(name string, rules ...any) {
		t.Helper()
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "k8s.tuna.am/v1alpha1", "kind": "AccessPolicy",
			"metadata": map[string]any{"name": name, "namespace": "reports"}, "spec": map[string]any{"rules": rules}}}
		if _, err := env.dyn.Resource(cluster.AccessPolicies.GVR()).Namespace("reports").Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = env.dyn.Resource(cluster.AccessPolicies.GVR()).Namespace("reports").Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	policy("shared", map[string]any{"links": map[string]any{"secretRef": map[string]any{"name": "share-key"}}})
	policy("partners", map[string]any{"basicAuth": map[string]any{"secretRef": map[string]any{"name": "no-such-secret"}}})

	r := tuna(t, "access", "link", "reports/shared", "--host", "reports.example.com", "--path", "/q3/", "--expires", "2h", "--uses", "3")
	expectCode(t, r, cmd.ExitOK)
	u, err := url.Parse(strings.TrimSpace(r.stdout))
	if err != nil || u.Scheme != "https" || u.Host != "reports.example.com" || u.Path != link.Path {
		t.Fatalf("link URL %q: %v", r.stdout, err)
	}
	l, _, err := link.Verify(u.Query().Get("t"), [][]byte{key})
	if err != nil || l.Host != "reports.example.com" || l.Path != "/q3/" || l.Uses != 3 ||
		l.Expires.Before(time.Now().Add(time.Hour)) || l.Expires.After(time.Now().Add(3*time.Hour)) {
		t.Fatalf("the link does not verify with the Secret's key as asked: %+v %v", l, err)
	}
	r = tuna(t, "access", "link", "partners", "-n", "reports", "--host", "x.example.com")
	expectCode(t, r, cmd.ExitInvalid)
	if !strings.Contains(r.stderr, "has no links rule") {
		t.Errorf("a policy without links: %s", r)
	}
	r = tuna(t, "access", "link", "reports/shared")
	expectCode(t, r, cmd.ExitInvalid)
	if !strings.Contains(r.stderr, "--host") {
		t.Errorf("a policy guarding nothing yet, without --host: %s", r)
	}

	// The status the AccessPolicy controller writes (no controller runs
	// here): in force, guarding one address through two users.
	shared, err := env.dyn.Resource(cluster.AccessPolicies.GVR()).Namespace("reports").Get(ctx, "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	shared.Object["status"] = map[string]any{
		"conditions": []any{map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "the edge enforces the policy",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "observedGeneration": shared.GetGeneration()}},
		"addresses": []any{map[string]any{"kind": "Domain", "name": "reports", "address": "reports.example.com"},
			map[string]any{"kind": "Tunnel", "name": "reports", "address": "reports.example.com"}},
	}
	if _, err := env.dyn.Resource(cluster.AccessPolicies.GVR()).Namespace("reports").UpdateStatus(ctx, shared, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = tuna(t, "status", "-n", "reports", "-o", "json")
	expectCode(t, r, cmd.ExitOK)
	st := decode[map[string][]cluster.Status](t, r)["items"]
	got := map[string]cluster.Status{}
	for _, s := range st {
		if s.Kind == "AccessPolicy" {
			got[s.Name] = s
		}
	}
	if s := got["shared"]; s.Ready != "True" || s.Reason != "Accepted" || s.Address != "reports.example.com" {
		t.Errorf("status of a policy in force: %+v, want Accepted True guarding reports.example.com (once)\n%s", s, r)
	}
	if s, ok := got["partners"]; !ok || s.Ready == "True" || s.Address != "-" {
		t.Errorf("status of a policy without a status yet: %+v (listed %v), want not ready, guarding nothing\n%s", s, ok, r)
	}
	r = tuna(t, "status", "-n", "reports")
	expectCode(t, r, cmd.ExitOK)
	if !strings.Contains(r.stdout, "reports.example.com") {
		t.Errorf("the table does not show the address a policy guards:\n%s", r.stdout)
	}

	r = tuna(t, append([]string{"preflight", "-o", "json"}, valuesArgs(env.Edge.OperatorKey)...)...)
	rep := decodeReport(t, r)
	if c := check(t, rep, "the Secrets of the AccessPolicies exist"); c.Result != report.Error ||
		!strings.Contains(c.Error, "reports/partners needs Secret no-such-secret (key htpasswd)") {
		t.Errorf("preflight does not name the missing Secret of an AccessPolicy: %+v", c)
	}
	if c := check(t, rep, "the edge enforces access policies"); c.Result != report.Success {
		t.Errorf("preflight of an edge with access policies: %+v", c)
	}
}
