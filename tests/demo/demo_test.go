package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// The demo as `go tool task demo` runs it, on a machine where kubectl is
// not built yet: the URL answers curl, every path it prints exists, kubectl
// is built after the URL and said ready, the env file gives kubectl,
// tuna-operator and tuna-edge the cluster and the edge, a namespace
// deletion completes and an object whose owner is deleted is collected
// (kube-controller-manager runs), and Ctrl-C stops everything and keeps
// the logs.
func TestDemoAsTheREADMESays(t *testing.T) {
	root := harness.RepoRoot()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	// What the task's demo:build does.
	build := exec.Command("go", "build", "-o", bin+"/", "./tests/demo", "./operator/cmd/tuna-k8s-operator", "./edge/cmd/tuna-edge", "./cli/cmd/tuna-operator")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	// A tools folder with all but kubectl: the demo builds it after the
	// URL (from the build cache the real tools filled, so in seconds).
	real, err := harness.ToolsWith(t.Context(), os.Stderr, "kube-apiserver", "etcd", "kubectl", "kube-controller-manager")
	require.NoError(t, err)
	tools := filepath.Join(dir, "tools")
	require.NoError(t, os.MkdirAll(tools, 0o755))
	for _, name := range []string{"kube-apiserver", "etcd", "kube-controller-manager"} {
		require.NoError(t, os.Symlink(filepath.Join(real, name), filepath.Join(tools, name)))
		if stamp, err := os.ReadFile(filepath.Join(real, ".stamp."+name)); err == nil {
			require.NoError(t, os.WriteFile(filepath.Join(tools, ".stamp."+name), stamp, 0o644))
		}
	}

	var stdout, stderr syncBuffer
	demo := exec.Command(filepath.Join(bin, "demo"), "-dir", dir, "-http-listen", "")
	demo.Dir = root
	demo.Env = append(withoutVar(os.Environ(), "TUNA_TEST_BINARIES"), "TUNA_TOOLS_CACHE="+tools)
	demo.Stdout, demo.Stderr = &stdout, &stderr
	demo.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, demo.Start())
	exited := make(chan error, 1)
	go func() { exited <- demo.Wait() }()
	defer func() {
		if demo.ProcessState == nil {
			_ = demo.Process.Kill()
			t.Logf("the demo was killed: %v", <-exited)
		}
		if t.Failed() {
			t.Logf("the demo's stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
	}()
	await := func(what string, timeout time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.After(timeout)
		for !cond() {
			select {
			case err := <-exited:
				exited <- err
				require.FailNow(t, "the demo exited before "+what, "%v", err)
			case <-deadline:
				require.FailNow(t, "not within "+timeout.String()+": "+what)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	await("its summary", 4*time.Minute, func() bool { return strings.Contains(stdout.String(), "Press Ctrl-C") })
	summary := stdout.String()

	url := submatch(t, summary, `(?m)^    curl (http://\S+)$`)
	assert.Equal(t, "http://demo.tuna.localhost", url[:strings.LastIndex(url, ":")])
	got, err := exec.Command("curl", "-sS", "--max-time", "10", url).CombinedOutput()
	require.NoError(t, err, "%s", got)
	assert.Contains(t, string(got), "Hello from Service demo/web")

	// Every path printed exists.
	env := submatch(t, summary, `(?m)^    \. (\S+)$`)
	assert.FileExists(t, env)
	envText, err := os.ReadFile(env)
	require.NoError(t, err)
	for _, v := range []string{"KUBECONFIG", "TUNA_EDGE_API_URL", "TUNA_EDGE_API_FINGERPRINT", "TUNA_EDGE_API_KEY", "PATH"} {
		assert.Contains(t, string(envText), "export "+v+"=")
	}
	logs := regexp.MustCompile(`(?m)^    (\S+)\s+(/\S+\.log)$`).FindAllStringSubmatch(summary[strings.Index(summary, "\nLogs:"):], -1)
	components := map[string]bool{}
	for _, l := range logs {
		components[l[1]] = true
		info, err := os.Stat(l[2])
		if assert.NoError(t, err, "the log of %s", l[1]) {
			assert.NotZero(t, info.Size(), "the log of %s (%s) is empty", l[1], l[2])
		}
	}
	for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "edge",
		"tuna-operator-tuna-k8s-operator-controller-0", "tuna-operator-tuna-k8s-operator-agent-0"} {
		assert.True(t, components[c], "the demo prints no log of %s: %v", c, components)
	}

	// kubectl was missing: the summary says it is building, not a path
	// that does not exist; then it is said ready, at a path that exists.
	assert.Contains(t, summary, "kubectl is not built yet: it is building now")
	assert.NotContains(t, summary, "kube-controller-manager is not built yet")
	await("kubectl said ready", 10*time.Minute, func() bool { return strings.Contains(stderr.String(), "kubectl v1.37.2 is ready: ") })
	kubectl := submatch(t, stderr.String(), `kubectl v1\.37\.2 is ready: (\S+) \(on PATH in `)
	assert.Equal(t, filepath.Join(tools, "kubectl"), kubectl)
	assert.FileExists(t, kubectl)

	sh := func(script string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", ". "+env+"\n"+script)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s\n%s", script, out)
		return string(out)
	}
	assert.Equal(t, kubectl+"\n", sh("command -v kubectl"))
	// Both agent replicas' sessions are counted (the URL needs one).
	sessions := regexp.MustCompile(`(?m)^demo\s+web\s+http\s+http://demo\.tuna\.localhost:\d+\s+True\s+2\s`)
	await("kubectl get tunnels -A: two sessions", time.Minute, func() bool { return sessions.MatchString(sh("kubectl get tunnels -A")) })
	assert.Regexp(t, `(?m)^Tunnel\s+demo\s+web\s+http://demo\.tuna\.localhost:\d+\s+True\s+Connected\s`, sh("tuna-operator status"))
	assert.Equal(t, "secret demo/db at version 1, keys password,user\n", sh("tuna-edge secrets set demo/db user=app password=s3cr3t"))

	// Namespace deletion completes, and owner references are collected:
	// kube-controller-manager's namespace and garbage collector
	// controllers run.
	sh(`kubectl create namespace gone
kubectl -n gone create configmap x --from-literal=a=b
kubectl delete namespace gone --timeout=90s
! kubectl get namespace gone`)
	sh(`kubectl create configmap owner
uid=$(kubectl get configmap owner -o jsonpath='{.metadata.uid}')
kubectl apply -f - <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: owned
  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: owner, uid: "$uid"}]
EOF
kubectl delete configmap owner
kubectl wait --for=delete configmap/owned --timeout=90s`)

	// Ctrl-C: the Tunnel is deleted, everything stops, the logs stay.
	require.NoError(t, demo.Process.Signal(os.Interrupt))
	select {
	case err := <-exited:
		require.NoError(t, err, "the demo's exit after Ctrl-C")
	case <-time.After(2 * time.Minute):
		require.FailNow(t, "the demo did not stop within 2 minutes of Ctrl-C")
	}
	assert.Contains(t, stderr.String(), "stopping: deleting the Tunnel")
	assert.NotContains(t, stderr.String(), "cleaning up")
	for _, l := range logs {
		assert.FileExists(t, l[2])
	}
	_, err = exec.Command("curl", "-sS", "--max-time", "5", url).CombinedOutput()
	assert.Error(t, err, "the edge still answers after Ctrl-C")
}

func submatch(t *testing.T, s, re string) string {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	require.NotNil(t, m, "no %s in:\n%s", re, s)
	return m[1]
}

func withoutVar(env []string, name string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, name+"=") {
			out = append(out, e)
		}
	}
	return out
}

// syncBuffer is a bytes.Buffer the demo's output goes to while the test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
