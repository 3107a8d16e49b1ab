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

	"code.tuna.am/tuna/k8s-operator/edge/dnstest"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// env is the shared setup: one control plane, edge and operator for the
// whole package; each test works in its own namespace.
var env struct {
	cp         *harness.ControlPlane
	edge       *harness.Edge
	controller *harness.Component
	agent      *harness.Component
	dns        *dnstest.Server
	edgeDir    string
	ids        *harness.Identities
}

// Intervals shortened for tests; production defaults are 5 minutes (DNS
// re-verification, as the seeds promise) and 1 minute (reservation resync).
const (
	dnsVerifyInterval = time.Second
	reservationResync = time.Second
)

// edgeOptions scale the edge's per-key API rate with the resync: re-reading
// every reservation each second instead of each minute makes sixty times the
// production traffic on the one operator key. The limit itself is tested in
// edge/server; the controller's waiting on 429 in TestEdgeAPIFailuresBackOff.
func edgeOptions() harness.EdgeOptions {
	return harness.EdgeOptions{KeepaliveInterval: time.Second, KeepaliveTimeout: 3 * time.Second, DNSResolver: env.dns.Addr(),
		APIRateLimit: 60 * 20, APIRateBurst: 60 * 40}
}

// startAgent starts the agent as the chart's agent ServiceAccount.
func startAgent() *harness.Component { return harness.StartAgent(env.ids.Agent) }

// startController starts the controller, as the chart's controller
// ServiceAccount, against the current edge.
func startController(mutate ...func(*app.ControllerOptions)) *harness.Component {
	return harness.StartController(env.ids.Controller, env.edge, append([]func(*app.ControllerOptions){func(o *app.ControllerOptions) {
		o.DNSVerifyInterval, o.ReservationResync = dnsVerifyInterval, reservationResync
	}}, mutate...)...)
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
	harness.UseTestLogger()
	cp, err := harness.StartControlPlane()
	if err != nil {
		return 0, err
	}
	defer cp.Stop()
	env.cp = cp
	if _, err := cp.Namespace(ctx, harness.OperatorNamespace); err != nil {
		return 0, err
	}
	// Before the components start: they turn Gateway support on only when
	// the CRDs are there (tests/e2e/scoped runs without them).
	if err := cp.InstallGatewayAPI(); err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "tuna-edge-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	dns, err := dnstest.Listen()
	if err != nil {
		return 0, err
	}
	defer dns.Close()
	env.dns = dns
	env.edgeDir = dir
	edge, err := harness.StartEdge(ctx, dir, edgeOptions())
	if err != nil {
		return 0, err
	}
	env.edge = edge
	defer func() { env.edge.Close() }()
	// The components run as the chart's ServiceAccounts, with exactly the
	// RBAC the chart grants.
	ids, err := cp.ChartIdentities(ctx)
	if err != nil {
		return 0, err
	}
	env.ids = ids
	env.controller = startController()
	env.agent = startAgent()
	code := m.Run()
	if err := env.agent.Stop(); err != nil {
		return 1, fmt.Errorf("agent: %w", err)
	}
	if err := env.controller.Stop(); err != nil {
		return 1, fmt.Errorf("controller: %w", err)
	}
	return code, nil
}
