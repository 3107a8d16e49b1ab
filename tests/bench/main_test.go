// Package bench measures the operator end to end on real parts: the time
// from creating a Tunnel to the first 200 through the edge, and the agent's
// memory and convergence time with many idle tunnels. The agent runs as its
// own process (the shipped binary), so its memory is its own.
//
//	go tool task bench      (or: go test -run '^$' -bench . -benchtime 1x ./tests/bench)
package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

var env struct {
	cp       *harness.ControlPlane
	edge     *harness.Edge
	agentPID int
}

func TestMain(m *testing.M) {
	flag.Parse()
	if flag.Lookup("test.bench").Value.String() == "" {
		os.Exit(m.Run()) // no benchmark asked for: skip the heavy setup
	}
	harness.UseTestLogger()
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench setup:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	ctx := context.Background()
	cp, err := harness.StartControlPlane()
	if err != nil {
		return 0, err
	}
	defer cp.Stop()
	env.cp = cp
	if _, err := cp.Namespace(ctx, harness.OperatorNamespace); err != nil {
		return 0, err
	}
	// Before the components start, which look for them once.
	if err := cp.InstallGatewayAPI(); err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "tuna-bench-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	// The benchmarks measure the operator, not the edge's per-key limit: a
	// 1,000-tunnel cold start makes about 2,000 API calls (list and issue a
	// key each), which the default 20/s would stretch to about 100 s.
	edge, err := harness.StartEdge(ctx, filepath.Join(dir, "edge"), harness.EdgeOptions{APIRateLimit: 1000, APIRateBurst: 2000})
	if err != nil {
		return 0, err
	}
	defer edge.Close()
	env.edge = edge
	controller := harness.StartController(cp.Config, edge)
	defer controller.Stop()

	bin := filepath.Join(dir, "tuna-k8s-operator")
	build := exec.Command("go", "build", "-o", bin, "./operator/cmd/tuna-k8s-operator")
	build.Dir, build.Stderr = harness.RepoRoot(), os.Stderr
	if err := build.Run(); err != nil {
		return 0, fmt.Errorf("building the operator: %w", err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		return 0, err
	}
	agent := exec.Command(bin, "agent", "--metrics-bind-address=0", "--health-probe-bind-address=0")
	agent.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "POD_NAMESPACE="+harness.OperatorNamespace)
	if err := agent.Start(); err != nil {
		return 0, fmt.Errorf("starting the agent: %w", err)
	}
	env.agentPID = agent.Process.Pid
	defer func() { _ = agent.Process.Kill(); _, _ = agent.Process.Wait() }()
	return m.Run(), nil
}
