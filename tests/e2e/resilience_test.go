package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// A backend that is down gives the public client a 502 that says so, and
// the tunnel stays up: same session, still Ready.
func TestUpstreamDownGives502(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	svc, err := harness.CreateService(ctx, env.CP.Client, ns, "web", harness.ServicePort{Port: 8080})
	require.NoError(t, err)
	backend, err := harness.ServeEcho("web", svc.Spec.ClusterIP, 8080)
	require.NoError(t, err)
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "web", ns, "http://web:8080")))
	tun := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	require.Equal(t, "web", getEcho(t, tun.Status.URL).Backend)

	require.NoError(t, backend.Close())
	code, body := get(t, tun.Status.URL)
	assert.Equal(t, http.StatusBadGateway, code)
	assert.Contains(t, string(body), "upstream web:8080")
	assert.Contains(t, string(body), "connection refused")

	backend, err = harness.ServeEcho("web-again", svc.Spec.ClusterIP, 8080)
	require.NoError(t, err)
	t.Cleanup(func() { backend.Close() })
	assert.Equal(t, "web-again", getEcho(t, tun.Status.URL).Backend)
	after := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	assert.Equal(t, tun.Status.SessionID, after.Status.SessionID, "a down upstream does not tear the tunnel down")
}

// After an agent restart every tunnel comes back on its address.
func TestAgentRestartRestoresTunnels(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	var before []*tunav1.Tunnel
	for _, name := range []string{"one", "two", "three"} {
		require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, name, ns+"-"+name, "http://web:8080")))
	}
	for _, name := range []string{"one", "two", "three"} {
		before = append(before, waitReady(t, key(ns, name), metav1.ConditionTrue, tunav1.ReasonConnected))
	}
	require.NoError(t, env.Agent.Stop())
	code, _ := get(t, before[0].Status.URL)
	require.Equal(t, http.StatusBadGateway, code, "with the agent down the address is known but not connected")

	env.Agent = startAgent()
	for _, old := range before {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			code, body := get(t, old.Status.URL)
			assert.Equal(c, http.StatusOK, code, "%s: %s", old.Status.URL, body)
		}, wait, 100*time.Millisecond)
		// The agent serves traffic before it writes the new session to
		// status, so await the status rather than read it once.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			now := waitReady(t, key(ns, old.Name), metav1.ConditionTrue, tunav1.ReasonConnected)
			assert.Equal(c, old.Status.URL, now.Status.URL)
			assert.NotEqual(c, old.Status.SessionID, now.Status.SessionID, "a new session after the restart")
		}, wait, 100*time.Millisecond)
	}
}

// After an edge restart tunnels reconnect by themselves and keep their
// addresses; keys and reservations survive in the edge's store.
func TestEdgeRestartReconnects(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "web", ns, "http://web:8080")))
	tun := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)

	old := env.Edge
	require.NoError(t, old.Close())
	waitReady(t, key(ns, "web"), metav1.ConditionFalse, tunav1.ReasonEdgeUnreachable)

	edge, err := harness.StartEdge(ctx, env.EdgeDir, old.Options)
	require.NoError(t, err)
	env.Edge = edge
	now := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	assert.Equal(t, tun.Status.URL, now.Status.URL, "the address is kept")
	assert.Equal(t, tun.Status.KeyID, now.Status.KeyID, "the key survived the restart")
	assert.Equal(t, "web-8080", getEcho(t, now.Status.URL).Backend)
}

// When the edge API answers 429 with Retry-After, the controller waits as
// told; on 503 without it, it backs off exponentially. Neither is a hot
// loop, and the tunnel comes up once the edge accepts. The edge is real;
// the failures come from a fault-injecting reverse proxy in front of it,
// because a real edge does not fail on demand.
func TestEdgeAPIFailuresBackOff(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int
		retryAfter string
		// maxCalls bounds the attempts in a 3 s window: a 2 s Retry-After
		// allows 2-3; exponential backoff from 5 ms about 10; a hot loop
		// hundreds.
		maxCalls int32
	}{
		{"429-retry-after", http.StatusTooManyRequests, "2", 3},
		{"503-backoff", http.StatusServiceUnavailable, "", 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := namespace(t)
			echoService(t, ns, "web", harness.ServicePort{Port: 8080})

			fault := newFaultProxy(t)
			fault.fail(faultRule{match: request(http.MethodPost, "/v1/tunnel-keys"), status: tc.status, code: "rate_limited", retryAfter: tc.retryAfter})
			controllerBehind(t, fault)
			require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "web", ns, "http://web:8080")))
			tun := waitReady(t, key(ns, "web"), metav1.ConditionFalse, tunav1.ReasonEdgeUnreachable)
			assert.Contains(t, readyMessage(tun.Status.Conditions), "injected failure")

			// Count the attempts in the window only: the time to reach
			// EdgeUnreachable grows with the machine's load and is no part
			// of the rate.
			before := fault.failed.Load()
			time.Sleep(3 * time.Second) // observing a rate over a window: nothing to await
			assert.LessOrEqual(t, fault.failed.Load()-before, tc.maxCalls, "the controller must back off")
			assert.GreaterOrEqual(t, before, int32(1))

			fault.heal()
			up := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
			// This Tunnel's own keys: the restarted controller also
			// reconciles other tests' Tunnels, whose calls a global count
			// of the proxy's would include.
			keys, err := env.Edge.Client(env.Edge.AdminKey).ListTunnelKeys(ctx, map[string]string{edgeapi.LabelUID: string(up.UID)})
			require.NoError(t, err)
			require.Len(t, keys, 1, "one key once the edge accepts")
			assert.Equal(t, up.Status.KeyID, keys[0].ID)
		})
	}
}
