package app

import (
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/session"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/metrics"
)

// tunnelHooks feeds one tunnel's events into the agent's metrics.
func tunnelHooks(key types.NamespacedName) session.Hooks {
	up := metrics.TunnelUp.WithLabelValues(key.Namespace, key.Name)
	up.Set(0)
	// Add, not Set: a restarted tunnel gets new hooks while its old
	// session may still be closing, and each session counts itself out.
	sessions := metrics.TunnelSessions.WithLabelValues(key.Namespace, key.Name)
	sessions.Add(0)
	return session.Hooks{
		Connected:    func() { metrics.TunnelsConnected.Inc(); up.Set(1); sessions.Inc() },
		Disconnected: func() { metrics.TunnelsConnected.Dec(); up.Set(0); sessions.Dec() },
		Attempt: func(reconnect bool) {
			kind := "first"
			if reconnect {
				kind = "reconnect"
			}
			metrics.TunnelConnects.WithLabelValues(kind).Inc()
		},
		Meter: tunnelMeter{key},
	}
}

func forgetTunnel(key types.NamespacedName) { metrics.ForgetTunnel(key.Namespace, key.Name) }

type tunnelMeter struct{ key types.NamespacedName }

func (m tunnelMeter) Request(code int, took time.Duration, in, out int64) {
	metrics.TunnelRequests.WithLabelValues(m.key.Namespace, m.key.Name, strconv.Itoa(code/100)+"xx").Inc()
	metrics.TunnelRequestDuration.WithLabelValues(m.key.Namespace, m.key.Name).Observe(took.Seconds())
	m.Bytes(in, out)
}

func (m tunnelMeter) Bytes(in, out int64) {
	metrics.TunnelBytes.WithLabelValues(m.key.Namespace, m.key.Name, "in").Add(float64(in))
	metrics.TunnelBytes.WithLabelValues(m.key.Namespace, m.key.Name, "out").Add(float64(out))
}
