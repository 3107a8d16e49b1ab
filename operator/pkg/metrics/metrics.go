// Package metrics declares the operator's Prometheus metrics in one place.
// They are registered with controller-runtime's registry, so they are served
// on the manager's metrics endpoint next to the built-in controller metrics
// (controller_runtime_reconcile_total, controller_runtime_reconcile_errors_total,
// workqueue_*). Labels are bounded: a tunnel is named by namespace and name;
// no hosts, paths or client addresses.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// TunnelsConnected is the number of tunnels with a live edge session.
	TunnelsConnected = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tuna_tunnels_connected",
		Help: "Tunnels of this agent with a live session to the edge.",
	})
	// TunnelUp is 1 while a tunnel has a live session, 0 while it does not.
	TunnelUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tuna_tunnel_up",
		Help: "1 while the tunnel has a live session to the edge, 0 while it is connecting.",
	}, []string{"namespace", "name"})
	// TunnelSessions is the number of live edge sessions serving a tunnel
	// (one today; a pool of sessions counts each).
	TunnelSessions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tuna_tunnel_sessions",
		Help: "Live edge sessions serving the tunnel.",
	}, []string{"namespace", "name"})
	// TunnelConnects counts session attempts: kind="first" or "reconnect".
	TunnelConnects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tuna_tunnel_connect_attempts_total",
		Help: "Attempts to open a tunnel session, by kind (first, reconnect).",
	}, []string{"kind"})
	// TunnelRequests counts HTTP requests served through a tunnel.
	TunnelRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tuna_tunnel_requests_total",
		Help: "HTTP requests served through a tunnel, by status code class.",
	}, []string{"namespace", "name", "code"})
	// TunnelRequestDuration observes the time to the end of each response.
	TunnelRequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "tuna_tunnel_request_duration_seconds",
		Help:    "Time from a request's arrival at the agent to the end of its response.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
	}, []string{"namespace", "name"})
	// TunnelBytes counts payload bytes through a tunnel.
	TunnelBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tuna_tunnel_bytes_total",
		Help: "Bytes carried through a tunnel, by direction (in: from public clients, out: to them).",
	}, []string{"namespace", "name", "direction"})
	// KeysIssued counts tunnel keys issued by the controller.
	KeysIssued = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tuna_tunnel_keys_issued_total",
		Help: "Ephemeral tunnel keys issued on the edge.",
	})
	// KeysRevoked counts tunnel keys revoked by the controller.
	KeysRevoked = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tuna_tunnel_keys_revoked_total",
		Help: "Ephemeral tunnel keys revoked on the edge.",
	})
	// EdgeAPICalls counts calls to the edge API by operation and result.
	EdgeAPICalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tuna_edge_api_calls_total",
		Help: "Calls to the edge control API, by operation (METHOD /route) and result (2xx, 4xx, 429, 5xx, error).",
	}, []string{"operation", "result"})
	// EdgeAPIWait counts the time calls waited for their API key's budget
	// on the edge, or for a Retry-After, before they were sent.
	EdgeAPIWait = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tuna_edge_api_wait_seconds_total",
		Help: "Time edge API calls waited for their API key's budget (the edge's advertised rate limit) or a Retry-After before they were sent.",
	})
	// EdgeAPIDuration observes edge API call latency.
	EdgeAPIDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "tuna_edge_api_call_duration_seconds",
		Help:    "Latency of edge control API calls, by operation.",
		Buckets: prometheus.ExponentialBuckets(0.002, 2.5, 10),
	}, []string{"operation"})
)

func init() {
	crmetrics.Registry.MustRegister(TunnelsConnected, TunnelUp, TunnelSessions, TunnelConnects, TunnelRequests,
		TunnelRequestDuration, TunnelBytes, KeysIssued, KeysRevoked, EdgeAPICalls, EdgeAPIWait, EdgeAPIDuration)
}

// ForgetTunnel drops a deleted tunnel's series, so label sets stay bounded
// by the tunnels that exist.
func ForgetTunnel(namespace, name string) {
	l := prometheus.Labels{"namespace": namespace, "name": name}
	TunnelUp.DeletePartialMatch(l)
	TunnelSessions.DeletePartialMatch(l)
	TunnelRequests.DeletePartialMatch(l)
	TunnelRequestDuration.DeletePartialMatch(l)
	TunnelBytes.DeletePartialMatch(l)
}
