//go:build node

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// cli runs the tuna-operator binary of the images against the node
// cluster and returns its stdout and exit code.
func cli(ctx context.Context, t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, env.build.Binary("tuna-operator"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.cluster.Kubeconfig)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("tuna-operator %s: %v", strings.Join(args, " "), err)
	}
	code := 0
	if exit != nil {
		code = exit.ExitCode()
	}
	if code != 0 {
		t.Logf("tuna-operator %s: exit %d, stderr:\n%s", strings.Join(args, " "), code, stderr.String())
	}
	return string(out), code
}

// TestCLIAgainstTheNode: tuna-operator preflight, plan and status against
// the cluster the chart was installed into by helm.
func TestCLIAgainstTheNode(t *testing.T) {
	ctx := context.Background()
	publishLoadTunnel(ctx, t, "cli")

	// The values of the install, as a user checks them before an upgrade.
	out, code := cli(ctx, t, "preflight", "-o", "json",
		"--set", "edge.apiURL="+env.edge.APIURL, "--set", "edge.apiFingerprint="+env.edge.Fingerprint,
		"--set", "credentials.apiKey="+env.edge.OperatorKey)
	if code != 0 {
		t.Errorf("preflight exit %d:\n%s", code, out)
	}
	var report struct {
		Success    bool `json:"success"`
		Categories []struct {
			Name   string `json:"categoryName"`
			Checks []struct {
				Description, Result, Error string
			} `json:"checks"`
		} `json:"categories"`
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("preflight -o json: %v\n%s", err, out)
	}
	ran := map[string]bool{}
	for _, c := range report.Categories {
		ran[c.Name] = len(c.Checks) > 0
		for _, ch := range c.Checks {
			if ch.Result == "error" {
				t.Errorf("preflight %s: %s: %s", c.Name, ch.Description, ch.Error)
			}
		}
	}
	for _, want := range []string{"kubernetes-api", "permissions", "crds", "edge"} {
		if !ran[want] {
			t.Errorf("preflight ran no %s check: %v", want, ran)
		}
	}
	if !report.Success {
		t.Errorf("preflight reports no success:\n%s", out)
	}

	// The release as helm installed it: the CLI's chart is the same, so a
	// plan with the same values changes nothing, and one more controller
	// changes the controller's Deployment.
	if out, code := cli(ctx, t, "plan", "--reuse-values"); code != 0 {
		t.Errorf("plan --reuse-values: exit %d, want 0 (nothing changes):\n%s", code, out)
	}
	out, code = cli(ctx, t, "plan", "--reuse-values", "--set", "controller.replicas=3")
	if code != 2 || !strings.Contains(out, "controller") {
		t.Errorf("plan --set controller.replicas=3: exit %d, want 2 and the controller's Deployment:\n%s", code, out)
	}

	out, code = cli(ctx, t, "status", "-n", appNamespace, "-o", "json")
	if code != 0 {
		t.Fatalf("status: exit %d", code)
	}
	if !strings.Contains(out, `"cli"`) || !strings.Contains(out, "cli."+harnessBaseDomain()) {
		t.Errorf("status does not list the Tunnel cli at its URL:\n%s", out)
	}
}
