package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"code.tuna.am/tuna/k8s-operator/cli/pkg/cmd"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/report"
	"code.tuna.am/tuna/k8s-operator/internal/version"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// nonroot is the distroless "nonroot" user the images and the chart's
// security contexts run as.
const nonroot = 65532

// TestBinariesRunAsNonRoot builds the binaries as the Dockerfile does
// (Docker itself cannot run here) and runs them as uid/gid 65532 from a
// read-only working directory with no writable home: the way the images
// run under the chart's security context (non-root, read-only root
// filesystem). The CLI also runs a preflight against the real apiserver
// and edge that way.
func TestBinariesRunAsNonRoot(t *testing.T) {
	root, err := os.MkdirTemp("", "tuna-image-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	bin := filepath.Join(root, "bin")
	work := filepath.Join(root, "work")
	for _, d := range []string{bin, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w "+version.LDFlags("v9.9.9-test", "0123456789abcdef", "2026-01-02T03:04:05Z"), "-o", bin+"/",
		"./operator/cmd/tuna-k8s-operator", "./edge/cmd/tuna-edge", "./cli/cmd/tuna-operator")
	build.Dir = harness.RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// Inputs the non-root user reads: a copy of the kubeconfig.
	kc, err := os.ReadFile(env.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(bin, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o444); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{root, bin} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(work, 0o555); err != nil { // read-only working directory
		t.Fatal(err)
	}

	asNonRoot := func(name string, args ...string) (string, string, int) {
		t.Helper()
		c := exec.Command(filepath.Join(bin, name), args...)
		c.Dir = work
		c.Env = []string{"HOME=/nonexistent", "PATH=/usr/bin:/bin"}
		if os.Geteuid() == 0 {
			c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nonroot, Gid: nonroot}}
		} else {
			t.Logf("not root: running %s as uid %d", name, os.Geteuid())
		}
		var out, errb bytes.Buffer
		c.Stdout, c.Stderr = &out, &errb
		err := c.Run()
		code := 0
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return out.String(), errb.String(), code
	}

	// The working directory really is read-only for that user.
	if out, errs, code := asNonRoot("tuna-operator", "render", "-f", "/dev/null", "--set", "edge.apiURL=http://x", "--set", "credentials.apiKey=k"); code != 0 || !strings.Contains(out, "kind: Deployment") {
		t.Fatalf("tuna-operator render as %d: exit %d\n%s", nonroot, code, errs)
	}
	probe := exec.Command("/bin/sh", "-c", "touch probe")
	probe.Dir = work
	if os.Geteuid() == 0 {
		probe.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nonroot, Gid: nonroot}}
	}
	if err := probe.Run(); err == nil {
		t.Fatal("the working directory is writable: the test proves nothing")
	}

	// Every binary reports the stamps the Dockerfile sets.
	const stamped = " v9.9.9-test (commit 0123456789ab, built 2026-01-02T03:04:05Z, "
	for _, name := range []string{"tuna-k8s-operator", "tuna-edge", "tuna-operator"} {
		if out, errs, code := asNonRoot(name, "version"); code != 0 || !strings.HasPrefix(out, name+stamped) {
			t.Fatalf("%s version: exit %d %q %s", name, code, out, errs)
		}
	}
	for _, sub := range []string{"controller", "agent"} {
		if out, errs, code := asNonRoot("tuna-k8s-operator", sub, "--help"); code != 0 || !strings.Contains(out, "--allow-external-upstreams") {
			t.Fatalf("tuna-k8s-operator %s --help: exit %d\n%s%s", sub, code, out, errs)
		}
	}
	if out, errs, code := asNonRoot("tuna-edge", "--help"); code != 0 || !strings.Contains(out, "serve") {
		t.Fatalf("tuna-edge --help: exit %d\n%s%s", code, out, errs)
	}

	// The CLI against the real apiserver and edge, as non-root, with the
	// documented exit codes.
	args := append([]string{"preflight", "-o", "json", "--kubeconfig", kubeconfig}, valuesArgs(env.Edge.OperatorKey)...)
	restoreChartCRDs(t)
	out, errs, code := asNonRoot("tuna-operator", args...)
	var rep report.Report
	if code != cmd.ExitOK || json.Unmarshal([]byte(out), &rep) != nil || !rep.Success {
		t.Fatalf("tuna-operator preflight as %d: exit %d\n%s\n%s", nonroot, code, out, errs)
	}
	if _, errs, code := asNonRoot("tuna-operator", "render", "--set", "edge.apiURL=http://x"); code != cmd.ExitInvalid || !strings.Contains(errs, "API key is not set") {
		t.Fatalf("tuna-operator render with bad values: exit %d %s", code, errs)
	}
	if _, _, code := asNonRoot("tuna-operator", append([]string{"plan", "--kubeconfig", kubeconfig}, valuesArgs(env.Edge.OperatorKey)...)...); code != cmd.ExitChanges {
		t.Fatalf("tuna-operator plan before an install: exit %d, want %d", code, cmd.ExitChanges)
	}
}
