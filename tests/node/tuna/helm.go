package tuna

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/node"
)

// Namespace is where the chart is installed, as the README does.
const Namespace = "tuna-system"

// ReleaseName is the Helm release's name, as the README's install line.
const ReleaseName = "tuna-operator"

// Release is the chart installed on a node cluster by the helm CLI.
type Release struct {
	Cluster *node.Cluster
	Edge    *Edge
	// Helm is the helm binary, Chart the packaged chart it installs.
	Helm, Chart string
	dir         string
}

// BuildHelm builds the stock helm CLI from the module go.mod pins
// (`go tool helm`) into dir.
func BuildHelm(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "helm")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "helm.sh/helm/v4/cmd/helm")
	cmd.Dir = harness.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building helm: %w\n%s", err, out)
	}
	return bin, nil
}

// RestrictedNamespace creates a namespace that enforces (and warns and
// audits at) the restricted Pod Security level.
func RestrictedNamespace(ctx context.Context, c *node.Cluster, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
		"pod-security.kubernetes.io/audit":   "restricted",
	}}}
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	return err
}

// Install packages the chart with helm and installs it as the README
// says, pointing at edge and with build's image tag, into a restricted
// namespace, waiting until its Deployments are ready. set adds
// --set values.
func Install(ctx context.Context, c *node.Cluster, edge *Edge, build *Build, dir string, set ...string) (*Release, error) {
	helm, err := BuildHelm(ctx, dir)
	if err != nil {
		return nil, err
	}
	r := &Release{Cluster: c, Edge: edge, Helm: helm, dir: dir}
	out, err := r.Run(ctx, "package", filepath.Join(harness.RepoRoot(), "chart", "tuna-k8s-operator"), "--destination", dir)
	if err != nil {
		return nil, err
	}
	// "Successfully packaged chart and saved it to: <path>"
	r.Chart = strings.TrimSpace(out[strings.LastIndex(out, ": ")+2:])
	if err := RestrictedNamespace(ctx, c, Namespace); err != nil {
		return nil, err
	}
	args := []string{"install", ReleaseName, r.Chart, "--namespace", Namespace,
		"--set", "edge.apiURL=" + edge.APIURL,
		"--set", "edge.apiFingerprint=" + edge.Fingerprint,
		"--set", "credentials.apiKey=" + edge.OperatorKey,
		"--set", "image.tag=" + build.Tag,
		"--wait", "--timeout", "5m"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	if _, err := r.Run(ctx, args...); err != nil {
		return nil, r.explain(err)
	}
	return r, nil
}

// Upgrade runs `helm upgrade --reuse-values` to build's image tag with
// set added, waiting for the rollout.
func (r *Release) Upgrade(ctx context.Context, build *Build, set ...string) error {
	args := []string{"upgrade", ReleaseName, r.Chart, "--namespace", Namespace, "--reuse-values",
		"--set", "image.tag=" + build.Tag, "--wait", "--timeout", "5m"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	if _, err := r.Run(ctx, args...); err != nil {
		return r.explain(err)
	}
	return nil
}

// explain adds to a failed install or upgrade what its pods, their logs,
// the namespace's events and the edge's log say, so that the failure is
// understood from the test's output alone.
func (r *Release) explain(err error) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return fmt.Errorf("%w\n%s\nthe edge's log, last lines:\n%s", err, r.Cluster.Describe(ctx, Namespace), tail(r.Edge.Log, 40))
}

// tail is the last n lines of the file at path, indented.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "  (" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// Run runs helm with the cluster's admin kubeconfig and its own folders.
func (r *Release) Run(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.Helm, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+r.Cluster.Kubeconfig,
		"HELM_CONFIG_HOME="+filepath.Join(r.dir, "helm-home", "config"),
		"HELM_CACHE_HOME="+filepath.Join(r.dir, "helm-home", "cache"),
		"HELM_DATA_HOME="+filepath.Join(r.dir, "helm-home", "data"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
