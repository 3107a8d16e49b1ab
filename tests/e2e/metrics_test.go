package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/metrics"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// The operator's metrics count what really happened: the components run in
// this process, so their registry is the one a scrape would read.
func TestMetricsReflectTraffic(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "web", ns, "http://web:8080")))
	require.NoError(t, env.CP.Client.Create(ctx, domain(ns, "metered", "metered-"+tag(ns), "")))
	tun := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	waitDomain(t, ns, "metered", metav1.ConditionTrue, tunav1.ReasonReserved)
	for range 5 {
		getEcho(t, tun.Status.URL+"/m")
	}

	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.TunnelUp.WithLabelValues(ns, "web")))
	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.TunnelSessions.WithLabelValues(ns, "web")), "one live session")
	// The agent counts a request once its proxy returns, which may be just
	// after the client has read the whole answer: await the count.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 5.0, testutil.ToFloat64(metrics.TunnelRequests.WithLabelValues(ns, "web", "2xx")))
	}, wait, 20*time.Millisecond)
	assert.Greater(t, testutil.ToFloat64(metrics.TunnelBytes.WithLabelValues(ns, "web", "out")), 5*100.0, "five echo bodies went out")
	assert.GreaterOrEqual(t, testutil.ToFloat64(metrics.KeysIssued), 1.0)
	assert.GreaterOrEqual(t, testutil.ToFloat64(metrics.EdgeAPICalls.WithLabelValues("POST /v1/tunnel-keys/batch", "2xx")), 1.0)
	assert.GreaterOrEqual(t, testutil.ToFloat64(metrics.EdgeAPICalls.WithLabelValues("POST /v1/domains", "2xx")), 1.0)

	families, err := crmetrics.Registry.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
		if f.GetName() == "tuna_tunnel_keys" {
			issued := map[string]float64{}
			for _, m := range f.GetMetric() {
				issued[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
			assert.GreaterOrEqual(t, issued[metrics.KeyIssued], 1.0, "the connected Tunnel's key is counted as issued: %v", issued)
			assert.Len(t, issued, 3, "issued, pending and failed are exported")
		}
		if f.GetName() == "tuna_reservations" {
			var ready float64
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["kind"] == "Domain" && labels["state"] == "ready" {
					ready = m.GetGauge().GetValue()
				}
			}
			assert.GreaterOrEqual(t, ready, 1.0, "the Ready Domain is counted")
		}
	}
	for _, n := range []string{"tuna_tunnels_connected", "tuna_tunnel_connect_attempts_total", "tuna_tunnel_request_duration_seconds",
		"tuna_edge_api_call_duration_seconds", "tuna_reservations", "tuna_tunnel_keys", "tuna_tunnel_sessions", "controller_runtime_reconcile_errors_total"} {
		assert.True(t, names[n], "metric %s is exported", n)
	}

	deleteAndWait(t, &tunav1.Tunnel{}, key(ns, "web"))
	deleteAndWait(t, &tunav1.Domain{}, key(ns, "metered"))
}
