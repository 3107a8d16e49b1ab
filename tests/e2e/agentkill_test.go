package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// One of two agent replicas is the shipped binary in a process of its own,
// killed with SIGKILL under load while it serves a share of it: nothing
// runs in it after the signal, the kernel closes its sockets. Only the
// requests in flight on it may fail, the other replica serves on, and once
// the killed replica's Lease lapses the Tunnel says its pool is below the
// desired size.
func TestSIGKILLedAgentFailsOnlyRequestsInFlight(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ownAgents(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "web", ns+"-web", "http://web:8080")))

	metricsAddr := ports.Addr(t)
	killed := agentProcess(t, "pool-a", "--metrics-bind-address="+metricsAddr, "--heartbeat-ttl=3s")
	b := poolAgent("pool-b")
	t.Cleanup(func() { assert.NoError(t, b.Stop()) })
	web := waitPool(t, key(ns, "web"), "pool-a", "pool-b")

	const workers = 4
	load := poolLoad(t, web.Status.URL, workers)
	// The process serves its share: its own metrics count the requests.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n, err := scrapeTunnelRequests(metricsAddr, ns, "web")
		require.NoError(c, err)
		assert.Greater(c, n, 20.0, "2xx requests served by the process")
	}, wait, 20*time.Millisecond)

	require.NoError(t, killed.Kill())
	okAtKill, _, _ := load.counts()
	require.Eventually(t, func() bool { ok, _, _ := load.counts(); return ok > okAtKill+100 }, wait, 10*time.Millisecond,
		"the other replica serves on after the kill")

	ok, failed, causes := load.stop()
	t.Logf("SIGKILL of one of two agents under load (%d workers): %d requests served, %d failed: %v", workers, ok, failed, causes)
	// Each worker has at most one request in flight when the process dies.
	assert.LessOrEqual(t, failed, int64(workers), "only requests in flight on the killed replica may fail: %v", causes)
	// Nothing removed the killed replica's entry but its lapsed Lease.
	degraded := meta.FindStatusCondition(waitPool(t, key(ns, "web"), "pool-b").Status.Conditions, tunav1.ConditionDegraded)
	require.NotNil(t, degraded)
	assert.Equal(t, tunav1.ReasonPoolBelowDesired, degraded.Reason)
}

// scrapeTunnelRequests reads an agent's /metrics and returns the 2xx
// requests it counted for the Tunnel ns/name.
func scrapeTunnelRequests(addr, ns, name string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	want := []string{`code="2xx"`, `name="` + name + `"`, `namespace="` + ns + `"`}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		series, value, found := strings.Cut(line, " ")
		if !found || !strings.HasPrefix(series, "tuna_tunnel_requests_total{") {
			continue
		}
		labels := strings.Split(strings.TrimSuffix(strings.TrimPrefix(series, "tuna_tunnel_requests_total{"), "}"), ",")
		if !slices.ContainsFunc(want, func(w string) bool { return !slices.Contains(labels, w) }) {
			return strconv.ParseFloat(value, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, nil
}

// A replica SIGKILLed with the chart's heartbeat (a 30 s Lease) leaves the
// Tunnel's status as soon as the edge no longer lists its session, long
// before its Lease lapses: status.sessions, the agents and Degraded say at
// once that one replica serves. The edge closed the session when the
// kernel closed the dead process's socket; the controller, which asks the
// edge, removes the entry.
func TestSIGKILLedAgentLeavesWhenTheEdgeDropsItsSession(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ownAgents(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "web", ns+"-web", "http://web:8080")))

	killed := agentProcess(t, "pool-a", "--metrics-bind-address=0") // the default heartbeat: a 30 s Lease
	b := poolAgent("pool-b")
	t.Cleanup(func() { assert.NoError(t, b.Stop()) })
	before := waitPool(t, key(ns, "web"), "pool-a", "pool-b")
	for _, e := range before.Status.Agents {
		assert.Equal(t, int32(1), e.Sessions, "%s counts its session with a single edge", e.Name)
	}

	require.NoError(t, killed.Kill())
	after := waitPool(t, key(ns, "web"), "pool-b")
	alive, err := (&agent.Heartbeat{Reader: env.CP.Client, Namespace: harness.OperatorNamespace}).Alive(ctx, "pool-a")
	require.NoError(t, err)
	assert.True(t, alive, "the entry left while the dead replica's Lease still holds: the edge, not the heartbeat, removed it")
	assert.Equal(t, int32(1), after.Status.Sessions)
	degraded := meta.FindStatusCondition(after.Status.Conditions, tunav1.ConditionDegraded)
	require.NotNil(t, degraded)
	assert.Equal(t, metav1.ConditionTrue, degraded.Status)
	assert.Equal(t, tunav1.ReasonPoolBelowDesired, degraded.Reason)
	assert.Equal(t, "1 of 2 agent replicas hold a live session of the tunnel", degraded.Message)
}

// agentProcess runs the shipped binary as agent replica name of two, as the
// chart's agent ServiceAccount, with fast keepalives and args; it is
// stopped when the test ends, and its log shown if the test failed.
func agentProcess(t *testing.T, name string, args ...string) *harness.Process {
	t.Helper()
	dir := t.TempDir()
	bin, err := harness.BuildOperator(dir)
	require.NoError(t, err)
	kubeconfig := dir + "/kubeconfig"
	require.NoError(t, env.CP.WriteKubeconfigAs(kubeconfig, env.IDs.Agent.Impersonate))
	p, err := harness.StartAgentProcess(bin, kubeconfig, dir, append([]string{"--replica=" + name, "--replicas=2",
		"--keepalive-interval=1s", "--keepalive-timeout=3s"}, args...)...)
	require.NoError(t, err)
	stopAtEnd(t, p, "agent "+name)
	return p
}

// stopAtEnd stops the process what when the test ends, unless it ended,
// and shows its log if the test failed.
func stopAtEnd(t *testing.T, p *harness.Process, what string) {
	t.Helper()
	t.Cleanup(func() {
		if !p.Exited() {
			assert.NoError(t, p.Stop())
		}
		if t.Failed() {
			if log, err := os.ReadFile(p.Log); err == nil {
				t.Logf("the log of %s:\n%s", what, log)
			}
		}
	})
}
