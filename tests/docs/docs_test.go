// Package docs runs the README's and the docs' snippets as written, in
// order, against the product as the chart installs it (tests/localcluster:
// a real control plane with kube-controller-manager, the edge, the
// chart's controller and agent replicas), as a user of the demo would
// follow them in its namespace default. YAML is applied, commands are run,
// and a command's output must be what the doc shows; every fenced block
// is marked with what to do with it, or why it cannot run here. It also
// checks that the architecture table, the README's layout and the
// packages' doc comments name every package.
//
// On a running demo instead of a cluster of its own, as a user follows
// the docs there (no other demo's objects in namespace default):
//
//	TUNA_DOCS_DEMO_ENV=$PWD/.cache/demo/run/env go test -count=1 -run TestDocsRunAsWritten ./tests/docs
package docs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/localcluster"
)

// walkthrough are the docs whose snippets run, in the order a user reads
// them; each must have runnable snippets.
var walkthrough = []string{
	"README.md",
	"docs/resources.md",
	"docs/ingress.md",
	"docs/loadbalancer.md",
	"docs/gateway-api.md",
	"docs/secrets.md",
	"docs/cli.md",
}

// demoHTTPPort is the edge's public HTTP port the docs show: the demo's
// (go tool task demo) when it is free.
const demoHTTPPort = "8080"

// outputWait bounds how long a command may take to print what the doc
// shows: statuses converge in seconds.
const outputWait = 90 * time.Second

// env is the walkthrough's: the snippets' shell environment, for one run
// of TestDocsRunAsWritten.
var env struct {
	dir string
	// environ is what a shell that sourced the cluster's env file has.
	environ []string
	// httpPort is the edge's public HTTP port here.
	httpPort string
}

// onDemoEnv, when set, is the env file of a running demo (go tool task
// demo prints it): the snippets run on that demo, as a user follows them,
// instead of on a local cluster of their own.
const onDemoEnv = "TUNA_DOCS_DEMO_ENV"

// built are the binaries the local cluster runs and the snippets call
// (tuna-k8s-operator, tuna-edge, tuna-operator), built once per process.
var built struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	harness.UseTestLogger()
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

func buildBinaries() (string, error) {
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "tuna-docs-bin-"); built.err != nil {
			return
		}
		build := exec.Command("go", "build", "-o", built.dir+"/", "./operator/cmd/tuna-k8s-operator", "./edge/cmd/tuna-edge", "./cli/cmd/tuna-operator")
		build.Dir = harness.RepoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("building the binaries: %w\n%s", err, out)
		}
	})
	return built.dir, built.err
}

// prepare starts a local cluster of the test's own, with the binaries the
// snippets call (tuna-edge, tuna-operator) built, or reads a running
// demo's env file. A walkthrough changes what it runs on (a secret's
// version on the edge): each run has a fresh cluster, and a demo serves
// one run.
func prepare(t *testing.T) {
	t.Helper()
	env.dir = t.TempDir()
	c, err := start(env.dir)
	if c != nil {
		t.Cleanup(func() { assert.NoError(t, c.Stop(), "stopping the local cluster") })
	}
	require.NoError(t, err)
}

func start(dir string) (*localcluster.Cluster, error) {
	// curl prints no progress meter to a terminal, where users run the
	// snippets, but does to a pipe: a .curlrc keeps it quiet here (errors
	// still show).
	if err := os.WriteFile(filepath.Join(dir, ".curlrc"), []byte("silent\nshow-error\n"), 0o600); err != nil {
		return nil, err
	}
	if file := os.Getenv(onDemoEnv); file != "" {
		return nil, readDemo(file)
	}
	ctx := context.Background()
	bin, err := buildBinaries()
	if err != nil {
		return nil, err
	}
	tools, err := harness.ToolsWith(ctx, os.Stderr, "kube-apiserver", "etcd", "kubectl", "kube-controller-manager")
	if err != nil {
		return nil, err
	}
	c, err := localcluster.Start(ctx, localcluster.Options{
		Dir: filepath.Join(dir, "cluster"), Operator: filepath.Join(bin, "tuna-k8s-operator"), Tools: tools,
		ControllerManager: filepath.Join(tools, "kube-controller-manager"),
		// A port of this process's: the demo's 8080 may be another's
		// (a demo, this test in another process); output is compared
		// as the demo's (fromDemoPort).
		ServeServices: true,
		Path:          []string{tools, bin},
	})
	if err != nil {
		return nil, err
	}
	env.environ = c.Environ()
	env.httpPort = c.Edge.HTTPAddr()[strings.LastIndex(c.Edge.HTTPAddr(), ":")+1:]
	return c, nil
}

// readDemo takes a running demo's environment from its env file, and its
// edge's HTTP port from the URL of its Tunnel demo/web.
func readDemo(file string) error {
	out, err := exec.Command("bash", "-c", `. "$0" && env -0`, file).Output()
	if err != nil {
		return fmt.Errorf("reading the demo's env file %s: %w", file, err)
	}
	env.environ = strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	url, err := shell(harness.RepoRoot(), "kubectl -n demo get tunnel web -o jsonpath='{.status.url}'", "")
	if err != nil {
		return fmt.Errorf("the demo's Tunnel demo/web: %w\n%s", err, url)
	}
	env.httpPort = url[strings.LastIndex(url, ":")+1:]
	return nil
}

// TestDocsRunAsWritten runs the walkthrough's snippets. A doc stops at its
// first failing snippet: the ones after it build on it.
func TestDocsRunAsWritten(t *testing.T) {
	root := harness.RepoRoot()
	prepare(t)
	for _, doc := range walkthrough {
		t.Run(doc, func(t *testing.T) {
			snippets, err := parseDoc(root, doc)
			require.NoError(t, err)
			ran := 0
			for _, s := range snippets {
				if s.mode == modeNotRun || s.mode == "" {
					continue
				}
				ran++
				if !runSnippet(t, root, s) {
					return
				}
			}
			require.NotZero(t, ran, "%s has no runnable snippet", doc)
		})
	}
}

// TestEverySnippetIsMarked: every fenced block of README.md and docs/*.md
// says whether and how it runs.
func TestEverySnippetIsMarked(t *testing.T) {
	root := harness.RepoRoot()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	docs = append([]string{filepath.Join(root, "README.md")}, docs...)
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		snippets, err := parseDoc(root, rel)
		require.NoError(t, err)
		for _, s := range snippets {
			if s.mode == "" {
				t.Errorf("%s:%d: the fenced block has no <!-- snippet: ... --> marker on the line before it "+
					"(apply, run, output or not run: REASON)", s.doc, s.line)
			}
		}
	}
}

// runSnippet runs one snippet; false when it failed.
func runSnippet(t *testing.T, root string, s snippet) bool {
	t.Helper()
	switch s.mode {
	case modeApply:
		out, err := shell(root, "kubectl apply -f -", s.body)
		if err != nil {
			t.Errorf("%s: kubectl apply failed: %v\n%s\n--- the snippet:\n%s", s, err, out, s.body)
			return false
		}
	case modeRun:
		out, err := shell(root, demoPort(s.body), "")
		if err != nil {
			t.Errorf("%s: failed: %v\n%s\n--- the snippet:\n%s", s, err, out, s.body)
			return false
		}
	case modeOutput:
		cmds, err := commands(s.body)
		if err != nil {
			t.Errorf("%s: %v", s, err)
			return false
		}
		for _, cmd := range cmds {
			if !awaitOutput(t, root, s, cmd) {
				return false
			}
		}
	}
	return true
}

// awaitOutput runs cmd until it prints what the doc shows, within
// outputWait: statuses converge.
func awaitOutput(t *testing.T, root string, s snippet, cmd command) bool {
	t.Helper()
	deadline := time.Now().Add(outputWait)
	for {
		out, _ := shell(root, demoPort(cmd.cmd), "")
		err := matcher{any: s.any, rewrite: fromDemoPort}.match(cmd.want, out)
		if err == nil {
			return true
		}
		if s.once || time.Now().After(deadline) {
			t.Errorf("%s: $ %s\nprints other than the doc shows: %v\n--- shown:\n%s--- printed:\n%s", s, cmd.cmd, err, cmd.want, out)
			return false
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// shell runs script with bash in the repository's root, in the local
// cluster's environment, stdin given; it returns stdout and stderr as one.
func shell(root, script, stdin string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), env.environ...), "CURL_HOME="+env.dir)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// demoPort points a command at this edge's HTTP port where the docs show
// the demo's; fromDemoPort shows output as the demo's.
func demoPort(s string) string {
	return strings.ReplaceAll(s, "tuna.localhost:"+demoHTTPPort, "tuna.localhost:"+env.httpPort)
}

func fromDemoPort(s string) string {
	return strings.ReplaceAll(s, "tuna.localhost:"+env.httpPort, "tuna.localhost:"+demoHTTPPort)
}
