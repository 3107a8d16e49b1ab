// Package e2e runs the product end to end on real parts: etcd and
// kube-apiserver built from pinned modules, the tuna edge on loopback, the
// operator's controller and agent, and backends listening on Services'
// loopback ClusterIPs. Public traffic goes through the edge's listener.
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// env is the shared setup: one control plane, edge and operator for the
// whole package; each test works in its own namespace.
var env struct {
	cp         *harness.ControlPlane
	edge       *harness.Edge
	controller *harness.Component
	agent      *harness.Component
}

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
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
	dir, err := os.MkdirTemp("", "tuna-edge-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	edge, err := harness.StartEdge(ctx, dir, harness.EdgeOptions{KeepaliveInterval: time.Second, KeepaliveTimeout: 3 * time.Second})
	if err != nil {
		return 0, err
	}
	defer edge.Close()
	env.edge = edge
	env.controller = harness.StartController(cp.Config, edge)
	env.agent = harness.StartAgent(cp.Config)
	code := m.Run()
	if err := env.agent.Stop(); err != nil {
		return 1, fmt.Errorf("agent: %w", err)
	}
	if err := env.controller.Stop(); err != nil {
		return 1, fmt.Errorf("controller: %w", err)
	}
	return code, nil
}
