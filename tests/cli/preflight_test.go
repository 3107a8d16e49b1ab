package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"code.tuna.am/tuna/k8s-operator/cli/pkg/cluster"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/cmd"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/report"
	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

func decodeReport(t *testing.T, r result) report.Report {
	t.Helper()
	return decode[report.Report](t, r)
}

// check returns the check whose description contains desc.
func check(t *testing.T, rep report.Report, desc string) report.Check {
	t.Helper()
	c := rep.Find(desc)
	if c == nil {
		t.Fatalf("no check %q in the report: %+v", desc, rep)
	}
	return *c
}

func preflightNS(t *testing.T) {
	t.Helper()
	if _, err := env.CP.Namespace(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
}

func TestPreflightHealthy(t *testing.T) {
	restoreChartCRDs(t)
	r := tuna(t, append([]string{"preflight", "-o", "json"}, valuesArgs(env.Edge.OperatorKey)...)...)
	expectCode(t, r, cmd.ExitOK)
	rep := decodeReport(t, r)
	if !rep.Success || rep.Count(report.Error) != 0 {
		t.Fatalf("healthy preflight failed: %s", r)
	}
	for _, desc := range []string{
		"is running Kubernetes 1.32 or newer",
		"can create what the install needs",
		"CRD tunnels.k8s.tuna.am is installed and current",
		"no other IngressClass is named tuna",
		"the operator's API key has exactly one source",
		"the edge API is reachable",
		"the edge accepts the API key with scope tunnels:write",
		"the edge is reachable over SSH",
	} {
		if c := check(t, rep, desc); c.Result != report.Success {
			t.Errorf("%s: %+v", desc, c)
		}
	}
	if c := check(t, rep, "is running Kubernetes"); c.Detail != "v1.37.2" {
		t.Errorf("server version: %+v", c)
	}
	if c := check(t, rep, "reachable over SSH"); !strings.Contains(c.Detail, "host key matches") {
		t.Errorf("SSH check: %+v", c)
	}

	// The text report, linkerd style.
	r = tuna(t, append([]string{"preflight"}, valuesArgs(env.Edge.OperatorKey)...)...)
	expectCode(t, r, cmd.ExitOK)
	for _, want := range []string{"kubernetes-api\n--------------\n✓ can initialize the client", "✓ the edge is reachable over SSH", "Status check results are ✓"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("text report lacks %q: %s", want, r)
		}
	}

	// A key with full access works, with a warning: more than needed.
	r = tuna(t, append([]string{"preflight", "-o", "json"}, valuesArgs(env.Edge.AdminKey)...)...)
	expectCode(t, r, cmd.ExitOK)
	if c := check(t, decodeReport(t, r), "accepts the API key"); c.Result != report.Warning || !strings.Contains(c.Error, "full access") {
		t.Fatalf("full key: %+v", c)
	}

	// --api-key and $TUNA_API_KEY take precedence over the values.
	r = tunaEnv(t, cmd.Env{Getenv: func(k string) string {
		if k == "TUNA_API_KEY" {
			return env.Edge.AdminKey
		}
		return ""
	}}, append([]string{"preflight", "-o", "json"}, valuesArgs(env.Edge.OperatorKey)...)...)
	if c := check(t, decodeReport(t, r), "accepts the API key"); c.Result != report.Warning || !strings.Contains(c.Error, "$TUNA_API_KEY") {
		t.Fatalf("key from the environment: %+v", c)
	}
}

func TestPreflightWrongScope(t *testing.T) {
	restoreChartCRDs(t)
	k, err := env.Edge.Client(env.Edge.AdminKey).CreateAPIKey(context.Background(), apiwire.CreateAPIKey{Name: "connect-only", Scopes: []string{apiwire.ScopeConnect}})
	if err != nil {
		t.Fatal(err)
	}
	r := tuna(t, append([]string{"preflight", "-o", "json"}, valuesArgs(k.Key)...)...)
	expectCode(t, r, cmd.ExitFailed)
	rep := decodeReport(t, r)
	c := check(t, rep, "accepts the API key")
	if rep.Success || c.Result != report.Error || !strings.Contains(c.Error, "tunnels:connect") || !strings.Contains(c.Hint, "tunnels:write") {
		t.Fatalf("tunnels:connect key: %+v", c)
	}

	// A key the edge does not know.
	r = tuna(t, append([]string{"preflight", "-o", "json"}, valuesArgs("tuna_0123456789abcdef_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")...)...)
	expectCode(t, r, cmd.ExitFailed)
	if c := check(t, decodeReport(t, r), "accepts the API key"); c.Result != report.Error || !strings.Contains(c.Error, "not valid") {
		t.Fatalf("unknown key: %+v", c)
	}
}

// With secretSync on, the operator's key must also read edge secrets,
// unless every SecretSync brings its own key; with it off, nothing is said.
func TestPreflightSecretSyncScope(t *testing.T) {
	restoreChartCRDs(t)
	writeOnly, err := env.Edge.Client(env.Edge.AdminKey).CreateAPIKey(context.Background(), apiwire.CreateAPIKey{Name: "tunnels-only", Scopes: []string{apiwire.ScopeWrite}})
	if err != nil {
		t.Fatal(err)
	}
	const desc = "may read edge secrets for SecretSyncs"
	r := tuna(t, append([]string{"preflight", "-o", "json", "--set", "secretSync.enabled=true"}, valuesArgs(writeOnly.Key)...)...)
	expectCode(t, r, cmd.ExitFailed)
	if c := check(t, decodeReport(t, r), desc); c.Result != report.Error || !strings.Contains(c.Error, "[tunnels:write]") || !strings.Contains(c.Hint, "secrets:read") {
		t.Fatalf("tunnels:write only, secretSync on: %+v", c)
	}
	r = tuna(t, append([]string{"preflight", "-o", "json", "--set", "secretSync.enabled=true", "--set", "secretSync.operatorKey=false"}, valuesArgs(writeOnly.Key)...)...)
	expectCode(t, r, cmd.ExitOK)
	if c := check(t, decodeReport(t, r), desc); c.Result != report.Success || !strings.Contains(c.Detail, "not needed") {
		t.Fatalf("operatorKey=false: %+v", c)
	}
	r = tuna(t, append([]string{"preflight", "-o", "json", "--set", "secretSync.enabled=true"}, valuesArgs(env.Edge.OperatorKey)...)...)
	expectCode(t, r, cmd.ExitOK)
	if c := check(t, decodeReport(t, r), desc); c.Result != report.Success || !strings.Contains(c.Detail, "secrets:read") {
		t.Fatalf("tunnels:write and secrets:read: %+v", c)
	}
	r = tuna(t, append([]string{"preflight", "-o", "json"}, valuesArgs(writeOnly.Key)...)...)
	expectCode(t, r, cmd.ExitOK)
	if rep := decodeReport(t, r); rep.Find(desc) != nil {
		c := rep.Find(desc)
		t.Fatalf("secretSync off, yet checked: %+v", c)
	}
}

func TestPreflightUnreachableEdge(t *testing.T) {
	restoreChartCRDs(t)
	// A port of this process's own block that nothing listens on; a port
	// picked with :0 and closed could be taken by another test's listener.
	closed := "http://" + ports.Addr(t)
	r := tuna(t, "preflight", "-o", "json", "--set", "credentials.apiKey="+env.Edge.OperatorKey, "--set", "edge.apiURL=https://edge.example.com", "--edge-api-url", closed)
	expectCode(t, r, cmd.ExitFailed)
	rep := decodeReport(t, r)
	c := check(t, rep, "the edge API is reachable")
	if c.Result != report.Error || !strings.Contains(c.Error, closed) || c.Hint == "" {
		t.Fatalf("unreachable edge: %+v", c)
	}
	if c := check(t, rep, "reachable over SSH"); c.Result != report.Warning || !strings.Contains(c.Error, "not checked") {
		t.Fatalf("SSH check after an unreachable API: %+v", c)
	}
	// The cluster checks still ran.
	if c := check(t, rep, "can create what the install needs"); c.Result != report.Success {
		t.Fatalf("permissions: %+v", c)
	}
}

func TestPreflightOldCRDs(t *testing.T) {
	// The cluster has CRDs of another chart version.
	c, err := cluster.Flags{Kubeconfig: env.kubeconfig}.Connect()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ApplyCRDs(context.Background(), modifiedCRDs(t), &strings.Builder{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { restoreChartCRDs(t) })
	r := tuna(t, append([]string{"preflight", "-o", "json"}, valuesArgs(env.Edge.OperatorKey)...)...)
	expectCode(t, r, cmd.ExitFailed)
	rep := decodeReport(t, r)
	ch := check(t, rep, "CRD tunnels.k8s.tuna.am is installed and current")
	if ch.Result != report.Error || !strings.Contains(ch.Error, "schema of version v1alpha1 changed") || !strings.Contains(ch.Hint, "tuna-operator upgrade") {
		t.Fatalf("stale CRD: %+v", ch)
	}
	if ch := check(t, rep, "CRD domains.k8s.tuna.am is installed and current"); ch.Result != report.Success {
		t.Fatalf("current CRD: %+v", ch)
	}
	r = tuna(t, append([]string{"preflight"}, valuesArgs(env.Edge.OperatorKey)...)...)
	if !strings.Contains(r.stdout, "× CRD tunnels.k8s.tuna.am is installed and current") || !strings.Contains(r.stdout, "hint: run `tuna-operator upgrade`") {
		t.Fatalf("text: %s", r)
	}
}

func TestPreflightSecret(t *testing.T) {
	restoreChartCRDs(t)
	preflightNS(t)
	ctx := context.Background()
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "tuna-creds", Namespace: ns},
		StringData: map[string]string{"token": env.Edge.OperatorKey},
	}
	if _, err := env.kube.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.kube.CoreV1().Secrets(ns).Delete(ctx, "tuna-creds", metav1.DeleteOptions{}) })
	vals := append(edgeArgs(), "--set", "credentials.existingSecret=tuna-creds", "--set", "clusterID="+harness.TestClusterID)

	// The Secret lacks the key api-key.
	r := tuna(t, append([]string{"preflight", "-o", "json"}, vals...)...)
	expectCode(t, r, cmd.ExitFailed)
	rep := decodeReport(t, r)
	c := check(t, rep, "Secret tuna-system/tuna-creds has the key api-key")
	if c.Result != report.Error || !strings.Contains(c.Error, "has no key api-key (it has: token)") || !strings.Contains(c.Hint, "api-key") {
		t.Fatalf("missing key: %+v", c)
	}
	// validate --cluster finds it too, as an input error.
	r = tuna(t, append([]string{"validate", "--cluster", "-o", "json"}, vals...)...)
	expectCode(t, r, cmd.ExitInvalid)
	if c := check(t, decodeReport(t, r), "has the key api-key"); c.Result != report.Error {
		t.Fatalf("validate --cluster: %+v", c)
	}
	// A missing Secret.
	r = tuna(t, append([]string{"preflight", "-o", "json", "--set", "credentials.existingSecret=nope"}, edgeArgs()...)...)
	expectCode(t, r, cmd.ExitFailed)
	if c := check(t, decodeReport(t, r), "Secret tuna-system/nope"); c.Result != report.Error || !strings.Contains(c.Hint, "kubectl -n tuna-system create secret generic nope") {
		t.Fatalf("missing Secret: %+v", c)
	}

	// With the key in place, preflight reads the API key from the Secret
	// and the edge accepts it.
	sec.StringData = map[string]string{"api-key": env.Edge.OperatorKey}
	if _, err := env.kube.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = tuna(t, append([]string{"preflight", "-o", "json"}, vals...)...)
	expectCode(t, r, cmd.ExitOK)
	rep = decodeReport(t, r)
	if c := check(t, rep, "accepts the API key"); c.Result != report.Success || !strings.Contains(c.Detail, "Secret tuna-creds") {
		t.Fatalf("key from the Secret: %+v", c)
	}
	expectCode(t, tuna(t, append([]string{"validate", "--cluster"}, vals...)...), cmd.ExitOK)
}

func TestPreflightIngressClass(t *testing.T) {
	restoreChartCRDs(t)
	ctx := context.Background()
	other := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "tuna"}, Spec: networkingv1.IngressClassSpec{Controller: "example.com/other"}}
	def := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx", Annotations: map[string]string{"ingressclass.kubernetes.io/is-default-class": "true"}},
		Spec:       networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"},
	}
	for _, ic := range []*networkingv1.IngressClass{other, def} {
		if _, err := env.kube.NetworkingV1().IngressClasses().Create(ctx, ic, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.kube.NetworkingV1().IngressClasses().Delete(ctx, ic.Name, metav1.DeleteOptions{}) })
	}
	r := tuna(t, append([]string{"preflight", "-o", "json", "--set", "ingressClass.default=true"}, valuesArgs(env.Edge.OperatorKey)...)...)
	expectCode(t, r, cmd.ExitFailed)
	rep := decodeReport(t, r)
	if c := check(t, rep, "no other IngressClass is named tuna"); c.Result != report.Error || !strings.Contains(c.Error, "example.com/other") {
		t.Fatalf("name conflict: %+v", c)
	}
	if c := check(t, rep, "no other IngressClass is the default"); c.Result != report.Error || !strings.Contains(c.Error, "nginx") {
		t.Fatalf("default conflict: %+v", c)
	}
	// Without the chart's IngressClass there is no conflict.
	r = tuna(t, append([]string{"preflight", "-o", "json", "--set", "ingressClass.enabled=false"}, valuesArgs(env.Edge.OperatorKey)...)...)
	expectCode(t, r, cmd.ExitOK)
}

func TestPreflightPermissions(t *testing.T) {
	restoreChartCRDs(t)
	// A user the cluster knows but has granted nothing.
	user, err := env.CP.Env.ControlPlane.AddUser(envtest.User{Name: "nobody"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	r := tuna(t, append([]string{"preflight", "-o", "json", "--kubeconfig", path}, valuesArgs(env.Edge.OperatorKey)...)...)
	expectCode(t, r, cmd.ExitFailed)
	c := check(t, decodeReport(t, r), "can create what the install needs")
	for _, want := range []string{"create customresourcedefinitions.apiextensions.k8s.io", "create clusterroles.rbac.authorization.k8s.io", "create deployments.apps in namespace tuna-system", "create secrets in namespace tuna-system"} {
		if c.Result != report.Error || !strings.Contains(c.Error, want) {
			t.Errorf("permissions lack %q: %+v", want, c)
		}
	}
	// The Roles of watchNamespaces are asked for in their own namespace.
	r = tuna(t, append([]string{"preflight", "-o", "json", "--kubeconfig", path, "--set", "watchNamespaces={team-x}"}, valuesArgs(env.Edge.OperatorKey)...)...)
	c = check(t, decodeReport(t, r), "can create what the install needs")
	for _, want := range []string{"create roles.rbac.authorization.k8s.io in namespace team-x", "create rolebindings.rbac.authorization.k8s.io in namespace team-x", "create roles.rbac.authorization.k8s.io in namespace tuna-system"} {
		if c.Result != report.Error || !strings.Contains(c.Error, want) {
			t.Errorf("permissions lack %q: %+v", want, c)
		}
	}
}

func TestPreflightNoCluster(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: x, cluster: {server: 'https://127.0.0.1:1'}}]\ncontexts: [{name: x, context: {cluster: x, user: x}}]\nusers: [{name: x, user: {}}]\ncurrent-context: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := tuna(t, append([]string{"preflight", "-o", "json", "--kubeconfig", path}, valuesArgs(env.Edge.OperatorKey)...)...)
	expectCode(t, r, cmd.ExitFailed)
	rep := decodeReport(t, r)
	if c := check(t, rep, "can query the Kubernetes API"); c.Result != report.Error || !strings.Contains(c.Error, "127.0.0.1:1") {
		t.Fatalf("unreachable cluster: %+v", c)
	}
	// The edge is still checked.
	if c := check(t, rep, "the edge accepts the API key"); c.Result != report.Success {
		t.Fatalf("edge check without a cluster: %+v", c)
	}
}

// Every namespace of watchNamespaces must exist: the chart's Roles go
// there, and the API server refuses them in a missing namespace. The
// permissions check asks for Roles in those namespaces, not the release's.
func TestPreflightWatchNamespaces(t *testing.T) {
	restoreChartCRDs(t)
	ctx := context.Background()
	present, missing := "preflight-watched", "preflight-not-yet"
	if _, err := env.CP.Namespace(ctx, present); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"preflight", "-o", "json", "--set", "watchNamespaces={" + present + "," + missing + "}"}, valuesArgs(env.Edge.OperatorKey)...)
	r := tuna(t, args...)
	expectCode(t, r, cmd.ExitFailed)
	c := check(t, decodeReport(t, r), "the namespaces of watchNamespaces exist")
	if c.Result != report.Error || c.Error != "missing: "+missing || !strings.Contains(c.Hint, "kubectl create namespace "+missing) {
		t.Errorf("missing namespace: %+v", c)
	}

	if _, err := env.CP.Namespace(ctx, missing); err != nil {
		t.Fatal(err)
	}
	r = tuna(t, args...)
	expectCode(t, r, cmd.ExitOK)
	rep := decodeReport(t, r)
	if c := check(t, rep, "the namespaces of watchNamespaces exist"); c.Result != report.Success || c.Detail != present+", "+missing {
		t.Errorf("both namespaces exist: %+v", c)
	}
	if c := check(t, rep, "can create what the install needs"); c.Result != report.Success {
		t.Errorf("permissions: %+v", c)
	}

	// Without the option there is nothing to check.
	r = tuna(t, append([]string{"preflight", "-o", "json"}, valuesArgs(env.Edge.OperatorKey)...)...)
	if c := check(t, decodeReport(t, r), "the namespaces of watchNamespaces exist"); c.Result != report.Success || !strings.Contains(c.Detail, "every namespace") {
		t.Errorf("default: %+v", c)
	}
}

// The edge API's certificate is self-signed: preflight without a pin says
// to set one; a wrong pin names both fingerprints; the certificate as a CA
// file works as well as the pin.
func TestPreflightEdgeTLS(t *testing.T) {
	restoreChartCRDs(t)
	base := []string{"preflight", "-o", "json", "--set", "credentials.apiKey=" + env.Edge.OperatorKey, "--set", "edge.apiURL=" + env.Edge.APIURL(),
		"--set", "clusterID=" + harness.TestClusterID}

	r := tuna(t, base...)
	expectCode(t, r, cmd.ExitFailed)
	c := check(t, decodeReport(t, r), "the edge API is reachable")
	if c.Result != report.Error || !strings.Contains(c.Error, "certificate") || !strings.Contains(c.Hint, "tuna-edge api-fingerprint") {
		t.Fatalf("no pin: %+v", c)
	}

	wrong := apiwire.Fingerprint([]byte("another certificate"))
	r = tuna(t, append(base, "--edge-api-fingerprint", wrong)...)
	expectCode(t, r, cmd.ExitFailed)
	c = check(t, decodeReport(t, r), "the edge API is reachable")
	if c.Result != report.Error || !strings.Contains(c.Error, wrong) || !strings.Contains(c.Error, env.Edge.APIFingerprint()) ||
		!strings.Contains(c.Hint, "edge.apiFingerprint") {
		t.Fatalf("wrong pin: %+v", c)
	}

	caFile := filepath.Join(t.TempDir(), "edge-api.pem")
	if err := os.WriteFile(caFile, env.Edge.APICertificatePEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"pin flag": {"--edge-api-fingerprint", env.Edge.APIFingerprint()},
		"CA file":  {"--edge-api-ca-file", caFile},
	} {
		r = tuna(t, append(base, args...)...)
		expectCode(t, r, cmd.ExitOK)
		if c := check(t, decodeReport(t, r), "accepts the API key"); c.Result != report.Success {
			t.Fatalf("%s: %+v", name, c)
		}
	}
	r = tuna(t, append(base, "--edge-api-ca-file", filepath.Join(t.TempDir(), "missing.pem"))...)
	expectCode(t, r, cmd.ExitInvalid)
}
