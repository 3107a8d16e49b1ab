// Package e2e runs the product end to end on real parts: etcd and
// kube-apiserver built from pinned modules, the tuna edge on loopback, the
// operator's controller and agent, and backends listening on Services'
// loopback ClusterIPs. Public traffic goes through the edge's listener.
package e2e

import (
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/dnstest"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/suite"
)

// env is the shared setup: one control plane, edge and operator for the
// whole package; each test works in its own namespace.
var env struct {
	suite.Env
	dns *dnstest.Server
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
func startAgent() *harness.Component { return harness.StartAgent(env.IDs.Agent) }

// startController starts the controller, as the chart's controller
// ServiceAccount, against the current edge.
func startController(mutate ...func(*app.ControllerOptions)) *harness.Component {
	return harness.StartController(env.IDs.Controller, env.Edge, append([]func(*app.ControllerOptions){shortIntervals}, mutate...)...)
}

func shortIntervals(o *app.ControllerOptions) {
	o.DNSVerifyInterval, o.ReservationResync = dnsVerifyInterval, reservationResync
}

func TestMain(m *testing.M) {
	suite.Main(m, &env.Env, suite.Options{
		Name: "e2e",
		// Before the components start: they turn Gateway support on only
		// when the CRDs are there (tests/e2e/scoped runs without them).
		GatewayAPI: true,
		// The DNS server the edge asks about custom domains.
		Before: func(*suite.Env) (func(), error) {
			dns, err := dnstest.Listen()
			if err != nil {
				return nil, err
			}
			env.dns = dns
			return func() { _ = dns.Close() }, nil
		},
		Edge: func(*suite.Env) (harness.EdgeOptions, error) { return edgeOptions(), nil },
		// The components run as the chart's ServiceAccounts, with exactly
		// the RBAC the chart grants.
		Controller: []func(*app.ControllerOptions){shortIntervals},
	})
}
