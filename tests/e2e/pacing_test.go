package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/metrics"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// The controller paces itself by the budget the edge advertises, and a
// 429 storm does not make it call faster. An edge with a small budget
// (5 calls/s, bursts of 10) gets 60 Tunnels at once, while another client
// of the operator's API key (a user's CLI with the same key, say) spends
// the key's whole budget, so the controller's calls are answered 429.
// The edge's own counter of API calls, less the other client's, is the
// controller's: it never exceeds what the budget allows in the time it
// took, refused calls included, and every Tunnel gets its key once the
// storm is over.
func TestControllerStaysWithinTheAdvertisedBudgetUnderA429Storm(t *testing.T) {
	const (
		limit, burst = 5, 10
		tunnels      = 60
	)
	ctx := context.Background()
	edge, err := harness.StartEdge(ctx, t.TempDir(), harness.EdgeOptions{KeepaliveInterval: time.Second, KeepaliveTimeout: 3 * time.Second,
		DNSResolver: env.dns.Addr(), APIRateLimit: limit, APIRateBurst: burst})
	require.NoError(t, err)
	t.Cleanup(func() { _ = edge.Close() })
	info, err := edge.Client(edge.AdminKey).Edge(ctx)
	require.NoError(t, err)
	require.Equal(t, &apiwire.RateLimit{PerSecond: limit, Burst: burst}, info.APIRateLimit, "the budget the edge advertises")

	// The storm: the other client sends without pause from 4 loops until
	// told to stop, each answer counted.
	var neighbour atomic.Int64
	storm, calm := context.WithCancel(ctx)
	var loops sync.WaitGroup
	other := edge.Client(edge.OperatorKey)
	for range 4 {
		loops.Go(func() {
			for storm.Err() == nil {
				_, err := other.WhoAmI(storm)
				if err == nil || apiwire.CodeOf(err) == apiwire.CodeRateLimited {
					neighbour.Add(1) // answered by the edge
				} else if storm.Err() == nil {
					t.Errorf("the other client: %v", err)
					return
				}
			}
		})
	}
	t.Cleanup(func() { calm(); loops.Wait() })
	waitedBefore := testutil.ToFloat64(metrics.EdgeAPIWait)

	start := time.Now()
	restartController(t, func(o *app.ControllerOptions) {
		o.EdgeAPIURL, o.EdgeAPIFingerprint, o.APIKey = edge.APIURL(), edge.APIFingerprint(), edge.OperatorKey
	})
	ns := namespace(t)
	// The Tunnels go before the usual controller is back, so their keys
	// are revoked on this test's edge and none is issued on the suite's.
	t.Cleanup(func() {
		require.NoError(t, env.CP.Client.DeleteAllOf(ctx, &tunav1.Tunnel{}, client.InNamespace(ns)))
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			var list tunav1.TunnelList
			require.NoError(c, env.CP.Client.List(ctx, &list, client.InNamespace(ns)))
			assert.Empty(c, list.Items, "Tunnels left")
		}, 2*wait, 100*time.Millisecond)
	})
	for i := range tunnels {
		name := fmt.Sprintf("t%d", i)
		require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, name, ns+"-"+name, "http://web:8080")))
	}
	// The storm lasts until the controller has been refused, and 3 s more.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		refused, err := controllerCalls(edge, &neighbour, http.StatusTooManyRequests)
		require.NoError(c, err)
		assert.Positive(c, refused, "calls of the controller answered 429")
	}, wait, 20*time.Millisecond, "the controller was never answered 429")
	stormed := time.Now()
	require.Eventually(t, func() bool { return time.Since(stormed) > 3*time.Second }, wait, 50*time.Millisecond)
	calm()
	loops.Wait()
	withinBudget(t, edge, &neighbour, "during the storm", time.Since(start), burst, limit)

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var list tunav1.TunnelList
		require.NoError(c, env.CP.Client.List(ctx, &list, client.InNamespace(ns)))
		issued := 0
		for _, tun := range list.Items {
			if k := status.Find(tun.Status.Conditions, tunav1.ConditionKeyIssued); k != nil && k.Status == metav1.ConditionTrue {
				issued++
			}
		}
		assert.Equal(c, tunnels, issued, "Tunnels with KeyIssued=True")
	}, 2*wait, 100*time.Millisecond)
	elapsed := time.Since(start)

	withinBudget(t, edge, &neighbour, "until every key was issued", elapsed, burst, limit)
	assert.Greater(t, testutil.ToFloat64(metrics.EdgeAPIWait), waitedBefore, "no call waited for the budget or a Retry-After")
}

// withinBudget checks that the controller called at most what the budget
// allows in elapsed: a burst, and limit per second.
func withinBudget(t *testing.T, edge *harness.Edge, neighbour *atomic.Int64, when string, elapsed time.Duration, burst, limit float64) {
	t.Helper()
	calls, err := controllerCalls(edge, neighbour, 0)
	require.NoError(t, err)
	refused, err := controllerCalls(edge, neighbour, http.StatusTooManyRequests)
	require.NoError(t, err)
	allowed := burst + limit*elapsed.Seconds()
	t.Logf("%s: the controller made %d calls in %s (the budget allows %.0f), %d of them answered 429; the other client %d",
		when, calls, elapsed.Round(time.Millisecond), allowed, refused, neighbour.Load())
	assert.LessOrEqual(t, float64(calls), allowed, "%s the controller called faster than the edge's advertised budget", when)
}

// controllerCalls is what the edge's counter says the controller called,
// answered with code (0: any): every call but GET /v1/whoami, which only
// the other client makes. The other client's count checks that: the edge
// answered it at least as often as the client had counted before the
// reading, and at most the calls in flight more than it counted after.
func controllerCalls(edge *harness.Edge, neighbour *atomic.Int64, code int) (int, error) {
	before := int(neighbour.Load())
	counts, err := edge.APIRequests()
	if err != nil {
		return 0, err
	}
	after := int(neighbour.Load())
	whoami := harness.Sum(counts, func(route string, _ int) bool { return route == "GET /v1/whoami" })
	if whoami < before || whoami > after+4 {
		return 0, fmt.Errorf("GET /v1/whoami was answered %d times, the other client counted %d to %d", whoami, before, after)
	}
	return harness.Sum(counts, func(route string, c int) bool { return route != "GET /v1/whoami" && (code == 0 || c == code) }), nil
}
