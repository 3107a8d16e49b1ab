package cmd

// Tests of the commands that need no cluster: render, validate, version,
// usage errors and exit codes. The commands run through Run with the
// arguments a user types; tests/cli runs the others against a real
// apiserver and edge.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"code.tuna.am/tuna/k8s-operator/cli/pkg/preflight"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/report"
	"code.tuna.am/tuna/k8s-operator/internal/version"
)

// testVersion is the build the commands are run as.
var testVersion = version.Info{Version: "1.2.3", Commit: "0123456789abcdef", Date: "2026-01-02T03:04:05Z", GoVersion: "go1.99", Platform: "plan9/mips"}

type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }, Version: testVersion})
	return result{code, out.String(), errb.String()}
}

func (r result) must(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got %d\nstdout:\n%s\nstderr:\n%s", code, r.code, r.stdout, r.stderr)
	}
	return r
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const edgeURL = "edge.apiURL=https://edge.example.com:8443"

// A well-formed API key (the edge's format) for the tests.
const apiKey = "tuna_0123456789abcdef_abcdefghijklmnopqrstuvwxyz234567"

// objects decodes `render -o json`.
func objects(t *testing.T, r result) []map[string]any {
	t.Helper()
	var list struct {
		Kind  string
		Items []map[string]any
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || list.Kind != "List" {
		t.Fatalf("render -o json: %v %q\n%s", err, list.Kind, r.stdout)
	}
	return list.Items
}

func findObject(items []map[string]any, kind, nameSuffix string) map[string]any {
	for _, it := range items {
		md, _ := it["metadata"].(map[string]any)
		if it["kind"] == kind && strings.HasSuffix(md["name"].(string), nameSuffix) {
			return it
		}
	}
	return nil
}

func controllerDeployment(t *testing.T, items []map[string]any) *appsv1.Deployment {
	t.Helper()
	obj := findObject(items, "Deployment", "-controller")
	if obj == nil {
		t.Fatal("no controller Deployment")
	}
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

func controllerEnv(t *testing.T, items []map[string]any) []corev1.EnvVar {
	t.Helper()
	return controllerDeployment(t, items).Spec.Template.Spec.Containers[0].Env
}

// keyFileSecret is the Secret the controller mounts its key file from, as
// --api-key-file says; it fails if the key is not a mounted file.
func keyFileSecret(t *testing.T, items []map[string]any) string {
	t.Helper()
	d := controllerDeployment(t, items)
	if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--api-key-file=/var/run/tuna/api-key/api-key") {
		t.Fatalf("no --api-key-file: %v", d.Spec.Template.Spec.Containers[0].Args)
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "api-key" && v.Secret != nil && len(v.Secret.Items) == 1 && v.Secret.Items[0].Key == "api-key" {
			return v.Secret.SecretName
		}
	}
	t.Fatalf("no api-key Secret volume: %+v", d.Spec.Template.Spec.Volumes)
	return ""
}

func apiKeyEnv(t *testing.T, env []corev1.EnvVar) corev1.EnvVar {
	t.Helper()
	var found []corev1.EnvVar
	for _, e := range env {
		if e.Name == "TUNA_API_KEY" {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("TUNA_API_KEY set %d times: %+v", len(found), env)
	}
	return found[0]
}

func TestRenderCredentialsModes(t *testing.T) {
	// credentials.apiKey: the chart makes the Secret the controller mounts.
	items := objects(t, run(t, "render", "-o", "json", "--set", edgeURL, "--set", "credentials.apiKey="+apiKey).must(t, ExitOK))
	sec := findObject(items, "Secret", "-api-key")
	if sec == nil {
		t.Fatal("credentials.apiKey: no Secret rendered")
	}
	if name := keyFileSecret(t, items); name != sec["metadata"].(map[string]any)["name"] {
		t.Fatalf("the key file does not come from the chart's Secret: %s", name)
	}

	// credentials.existingSecret: no chart Secret, the user's Secret.
	items = objects(t, run(t, "render", "-o", "json", "--set", edgeURL, "--set", "credentials.existingSecret=mine").must(t, ExitOK))
	if findObject(items, "Secret", "") != nil {
		t.Fatal("existingSecret: the chart rendered a Secret")
	}
	if name := keyFileSecret(t, items); name != "mine" {
		t.Fatalf("existingSecret: the key file comes from %s", name)
	}

	// extraEnv from a secret injector, with podAnnotations.
	r := run(t, "render", "-o", "json", "--set", edgeURL,
		"--set-json", `extraEnv=[{"name":"TUNA_API_KEY","value":"vault:secret/data/tuna#api-key"}]`,
		"--set", "podAnnotations.vault\\.security\\.banzaicloud\\.io/vault-role=tuna").must(t, ExitOK)
	items = objects(t, r)
	if e := apiKeyEnv(t, controllerEnv(t, items)); e.Value != "vault:secret/data/tuna#api-key" || e.ValueFrom != nil {
		t.Fatalf("extraEnv: %+v", e)
	}
	if findObject(items, "Secret", "") != nil {
		t.Fatal("extraEnv: the chart rendered a Secret")
	}
	if !strings.Contains(r.stdout, `"vault.security.banzaicloud.io/vault-role": "tuna"`) {
		t.Fatal("podAnnotations not rendered")
	}
}

func TestRenderValuesFilesAndSet(t *testing.T) {
	base := writeFile(t, "base.yaml", "edge:\n  apiURL: https://edge.example.com\ncredentials:\n  existingSecret: from-base\ncontroller:\n  replicas: 2\n")
	over := writeFile(t, "over.yaml", "credentials:\n  existingSecret: from-over\n")

	// Later files win; --set wins over files.
	items := objects(t, run(t, "render", "-o", "json", "-f", base, "-f", over).must(t, ExitOK))
	if name := keyFileSecret(t, items); name != "from-over" {
		t.Fatalf("-f order: %s", name)
	}
	r := run(t, "render", "-f", base, "-f", over, "--set", "credentials.existingSecret=from-set", "--namespace", "ops", "--release", "tuna").must(t, ExitOK)
	docs := strings.Split(r.stdout, "\n---\n")
	var d appsv1.Deployment
	for _, doc := range docs {
		if strings.Contains(doc, "kind: Deployment") && strings.Contains(doc, "name: tuna-tuna-k8s-operator-controller") {
			if err := yaml.Unmarshal([]byte(doc[strings.Index(doc, "apiVersion"):]), &d); err != nil {
				t.Fatal(err)
			}
		}
	}
	if d.Namespace != "ops" || *d.Spec.Replicas != 2 {
		t.Fatalf("--namespace/--release or file values lost: %s %v", d.Namespace, d.Spec.Replicas)
	}
	if !strings.Contains(r.stdout, "secretName: from-set") || strings.Contains(r.stdout, "from-over") {
		t.Fatal("--set did not win over -f")
	}
	if !strings.HasPrefix(r.stdout, "---\n# Source: tuna-k8s-operator/templates/") {
		t.Fatalf("not helm template's format: %.80s", r.stdout)
	}
	if strings.Contains(r.stdout, "kind: CustomResourceDefinition") {
		t.Fatal("CRDs without --include-crds")
	}

	// --include-crds puts the CRDs first.
	items = objects(t, run(t, "render", "-o", "json", "-f", base, "--include-crds").must(t, ExitOK))
	for i := 0; i < 3; i++ {
		if items[i]["kind"] != "CustomResourceDefinition" {
			t.Fatalf("item %d is %v, want a CRD", i, items[i]["kind"])
		}
	}
}

func TestRenderBadValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no credentials", []string{"--set", edgeURL}, []string{"API key is not set", "credentials.apiKey", "credentials.existingSecret", "extraEnv"}},
		{"two credentials", []string{"--set", edgeURL, "--set", "credentials.apiKey=" + apiKey, "--set", "credentials.existingSecret=s"}, []string{"2 sources (credentials.apiKey, credentials.existingSecret)"}},
		{"three credentials", []string{"--set", edgeURL, "--set", "credentials.apiKey=" + apiKey, "--set", "credentials.existingSecret=s", "--set-json", `extraEnv=[{"name":"TUNA_API_KEY","value":"x"}]`}, []string{"3 sources"}},
		{"no edge URL", []string{"--set", "credentials.existingSecret=s"}, []string{"edge.apiURL is required"}},
		{"unknown key", []string{"--set", edgeURL, "--set", "credentials.existingSecret=s", "--set", "credentials.apiKeys=x"}, []string{"credentials: additional properties 'apiKeys' not allowed"}},
		{"wrong type", []string{"--set", edgeURL, "--set", "credentials.existingSecret=s", "--set", "controller.replicas=many"}, []string{"controller.replicas: got string, want integer"}},
		{"extraEnv POD_NAMESPACE", []string{"--set", edgeURL, "--set", "credentials.existingSecret=s", "--set-json", `extraEnv=[{"name":"POD_NAMESPACE","value":"x"}]`}, []string{"must not set POD_NAMESPACE"}},
		{"extraEnv twice", []string{"--set", edgeURL, "--set-json", `extraEnv=[{"name":"TUNA_API_KEY","value":"a"},{"name":"TUNA_API_KEY","value":"b"}]`}, []string{"sets TUNA_API_KEY twice"}},
		{"default class without class", []string{"--set", edgeURL, "--set", "credentials.existingSecret=s", "--set", "ingressClass.enabled=false", "--set", "ingressClass.default=true"}, []string{"ingressClass.default=true needs ingressClass.enabled=true"}},
		{"old Kubernetes", []string{"--set", edgeURL, "--set", "credentials.existingSecret=s", "--kube-version", "v1.31.9"}, []string{"the chart needs Kubernetes >=1.32.0-0, the target is v1.31.9", "Hint: upgrade the cluster"}},
		{"bad --set", []string{"--set", "a.b"}, []string{"--set", "Hint:"}},
		{"missing -f", []string{"-f", "/nonexistent/values.yaml"}, []string{"/nonexistent/values.yaml"}},
		{"no values at all", nil, []string{"edge.apiURL is required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, append([]string{"render"}, tc.args...)...).must(t, ExitInvalid)
			if r.stdout != "" {
				t.Errorf("stdout on failure: %q", r.stdout)
			}
			if !strings.HasPrefix(r.stderr, "Error: ") {
				t.Errorf("stderr: %q", r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
			if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); !strings.HasPrefix(lines[len(lines)-1], "Hint: ") {
				t.Errorf("the error does not end with a Hint: line:\n%s", r.stderr)
			}
			if strings.Contains(r.stderr, "execution error at") || strings.Contains(r.stderr, "rendering chart") {
				t.Errorf("Helm's internals leak into the message:\n%s", r.stderr)
			}
		})
	}
}

func validate(t *testing.T, code int, args ...string) report.Report {
	t.Helper()
	r := run(t, append([]string{"validate", "-o", "json"}, args...)...).must(t, code)
	var rep report.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("validate -o json: %v\n%s", err, r.stdout)
	}
	if rep.Success != (code == ExitOK) {
		t.Fatalf("success=%v with exit %d", rep.Success, code)
	}
	return rep
}

func checkResult(t *testing.T, rep report.Report, desc string, want report.Result, errPart string) {
	t.Helper()
	c := rep.Find(desc)
	if c == nil {
		t.Fatalf("no check %q: %+v", desc, rep)
	}
	if c.Result != want || !strings.Contains(c.Error+c.Detail, errPart) {
		t.Fatalf("check %q: %+v, want %s with %q", desc, *c, want, errPart)
	}
}

func TestValidate(t *testing.T) {
	rep := validate(t, ExitOK, "--set", edgeURL, "--set", "credentials.existingSecret=mine")
	checkResult(t, rep, "exactly one source", report.Success, `credentials.existingSecret: Secret "mine", key api-key`)
	checkResult(t, rep, "edge.apiURL", report.Success, "https://edge.example.com:8443")

	// Bad values: × with the chart's message, exit 3.
	rep = validate(t, ExitInvalid, "--set", edgeURL)
	checkResult(t, rep, "values match", report.Error, "API key is not set")

	// A tunnel key is no API key.
	rep = validate(t, ExitInvalid, "--set", edgeURL, "--set", "credentials.apiKey=tunt_0123456789abcdef_abcdefghijklmnopqrstuvwxyz234567")
	checkResult(t, rep, "credentials.apiKey is an API key", report.Error, "tunnel key")

	// extraEnv: an injector reference needs the injector's annotations.
	rep = validate(t, ExitOK, "--set", edgeURL, "--set-json", `extraEnv=[{"name":"TUNA_API_KEY","value":"vault:secret/data/tuna#api-key"}]`)
	checkResult(t, rep, "extraEnv injects TUNA_API_KEY", report.Success, "vault:secret/data/tuna#api-key")
	checkResult(t, rep, "podAnnotations configure the secret injector", report.Warning, "no vault.security.banzaicloud.io/")
	vaultFile := writeFile(t, "vault.yaml", "edge:\n  apiURL: https://edge.example.com\npodAnnotations:\n  vault.security.banzaicloud.io/vault-addr: https://vault:8200\nextraEnv:\n  - name: TUNA_API_KEY\n    value: vault:secret/data/tuna#api-key\n")
	rep = validate(t, ExitOK, "-f", vaultFile)
	if rep.Count(report.Warning) != 0 {
		t.Fatalf("warnings with the annotations set: %+v", rep)
	}

	// extraEnv: the key in plain text warns; from a Secret is fine; empty fails.
	rep = validate(t, ExitOK, "--set", edgeURL, "--set-json", `extraEnv=[{"name":"TUNA_API_KEY","value":"`+apiKey+`"}]`)
	checkResult(t, rep, "extraEnv injects TUNA_API_KEY", report.Warning, "plain text")
	rep = validate(t, ExitOK, "--set", edgeURL, "--set-json", `extraEnv=[{"name":"TUNA_API_KEY","valueFrom":{"secretKeyRef":{"name":"s","key":"k"}}}]`)
	checkResult(t, rep, "extraEnv injects TUNA_API_KEY", report.Success, `from Secret "s", key k`)
	rep = validate(t, ExitInvalid, "--set", edgeURL, "--set-json", `extraEnv=[{"name":"TUNA_API_KEY","value":""}]`)
	checkResult(t, rep, "extraEnv injects TUNA_API_KEY", report.Error, "neither value nor valueFrom")

	// A plain-HTTP edge off loopback warns; a non-URL fails (the schema).
	rep = validate(t, ExitOK, "--set", "edge.apiURL=http://edge.example.com", "--set", "credentials.apiKey="+apiKey)
	checkResult(t, rep, "edge.apiURL", report.Warning, "unencrypted")
	rep = validate(t, ExitInvalid, "--set", "edge.apiURL=edge.example.com", "--set", "credentials.apiKey="+apiKey)
	checkResult(t, rep, "values match", report.Error, "edge.apiURL: 'edge.example.com' does not match pattern")

	// The text report.
	r := run(t, "validate", "--set", edgeURL).must(t, ExitInvalid)
	if !strings.Contains(r.stdout, "× values match values.schema.json and the chart's rules") || !strings.Contains(r.stdout, "Status check results are ×") {
		t.Fatalf("text report:\n%s", r.stdout)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"nope"},
		{"render", "--bogus"},
		{"render", "extra-arg"},
		{"render", "-o", "xml", "--set", edgeURL, "--set", "credentials.existingSecret=s"},
		{"plan", "--reuse-values", "--reset-values"},
		{"status", "-o", "table"},
	} {
		r := run(t, args...).must(t, ExitInvalid)
		if !strings.Contains(r.stderr, "Error: ") || !strings.Contains(r.stderr, "Hint: ") {
			t.Errorf("%v: %q", args, r.stderr)
		}
	}
}

func TestClusterUnreachable(t *testing.T) {
	kc := writeFile(t, "kubeconfig", "apiVersion: v1\nkind: Config\nclusters: [{name: x, cluster: {server: 'https://127.0.0.1:1'}}]\ncontexts: [{name: x, context: {cluster: x, user: x}}]\nusers: [{name: x, user: {}}]\ncurrent-context: x\n")
	for _, args := range [][]string{{"status"}, {"plan", "--set", edgeURL}, {"uninstall"}} {
		r := run(t, append(args, "--kubeconfig", kc)...).must(t, ExitFailed)
		if !strings.Contains(r.stderr, "cannot reach the Kubernetes API server at https://127.0.0.1:1") {
			t.Errorf("%v: %q", args, r.stderr)
		}
	}
	r := run(t, "status", "--kubeconfig", filepath.Join(t.TempDir(), "missing")).must(t, ExitFailed)
	if !strings.Contains(r.stderr, "--kubeconfig") {
		t.Errorf("missing kubeconfig: %q", r.stderr)
	}
}

func TestVersionAndHelp(t *testing.T) {
	r := run(t, "version").must(t, ExitOK)
	const build = "1.2.3 (commit 0123456789ab, built 2026-01-02T03:04:05Z, go1.99 plan9/mips)"
	if r.stdout != "tuna-operator "+build+"\nchart tuna-k8s-operator 0.1.0 (app 0.1.0)\n" {
		t.Fatalf("version: %q", r.stdout)
	}
	if r := run(t, "--version").must(t, ExitOK); r.stdout != "tuna-operator "+build+"\n" {
		t.Fatalf("--version: %q", r.stdout)
	}
	var v map[string]string
	if err := json.Unmarshal([]byte(run(t, "version", "-o", "json").must(t, ExitOK).stdout), &v); err != nil ||
		v["version"] != "1.2.3" || v["commit"] != testVersion.Commit || v["date"] != testVersion.Date || v["chartVersion"] != "0.1.0" {
		t.Fatalf("version -o json: %v %v", v, err)
	}
	r = run(t, "--help").must(t, ExitOK)
	for _, w := range []string{"Exit codes:", "2  plan: the install or upgrade would change something", "completion", "preflight"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("--help lacks %q", w)
		}
	}
	for _, c := range []string{"render", "validate", "plan", "install", "upgrade", "uninstall", "preflight", "status", "version"} {
		if r := run(t, c, "--help").must(t, ExitOK); !strings.Contains(r.stdout, "Exit codes:") {
			t.Errorf("%s --help does not document its exit codes", c)
		}
	}
	r = run(t, "completion", "bash").must(t, ExitOK)
	if !strings.Contains(r.stdout, "__start_tuna-operator") {
		t.Fatalf("bash completion: %.200s", r.stdout)
	}
}

// Every category preflight reports is explained in its --help and in the
// preflight table of docs/cli.md.
func TestPreflightCategoriesDocumented(t *testing.T) {
	help := run(t, "preflight", "--help").must(t, ExitOK).stdout
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range preflight.Categories {
		if !slices.ContainsFunc(strings.Split(help, "\n"), func(l string) bool { return strings.HasPrefix(l, "  "+c+" ") }) {
			t.Errorf("preflight --help does not explain the category %s", c)
		}
		if !strings.Contains(string(doc), "\n| "+c+" |") {
			t.Errorf("docs/cli.md's preflight table has no row for the category %s", c)
		}
	}
}
