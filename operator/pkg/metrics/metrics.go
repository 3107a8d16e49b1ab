// Package metrics declares the operator's Prometheus metrics in one place.
// They are registered with controller-runtime's registry, so they are served
// on the manager's metrics endpoint next to the built-in controller metrics.
// Labels are bounded: no hosts, paths or client addresses.
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
	// TunnelConnects counts session attempts: kind="first" or "reconnect".
	TunnelConnects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tuna_tunnel_connect_attempts_total",
		Help: "Attempts to open a tunnel session, by kind (first, reconnect).",
	}, []string{"kind"})
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
)

func init() {
	crmetrics.Registry.MustRegister(TunnelsConnected, TunnelConnects, KeysIssued, KeysRevoked)
}
