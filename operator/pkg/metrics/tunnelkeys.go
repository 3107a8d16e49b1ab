package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// The states of a Tunnel's key, the values of tuna_tunnel_keys' state label.
const (
	// KeyIssued: KeyIssued=True, the agent has a key to connect with.
	KeyIssued = "issued"
	// KeyPending: no KeyIssued condition yet, or Unknown (the edge could
	// not be asked; a key already issued keeps serving meanwhile).
	KeyPending = "pending"
	// KeyFailed: KeyIssued=False, the edge refused the key; the Tunnel
	// cannot connect until its spec (or the edge's answer) changes.
	KeyFailed = "failed"
)

var tunnelKeysDesc = prometheus.NewDesc("tuna_tunnel_keys",
	"Tunnels by the state of their key (condition KeyIssued): issued, pending, failed.",
	[]string{"state"}, nil)

// tunnelKeys counts Tunnels by key state, as reservations does: a refused
// key is a state that lasts until the spec changes, so a rate of failed
// calls would stop showing it after the first try.
var tunnelKeys = newScraped(tunnelKeysDesc)

// ObserveTunnelKeys makes tuna_tunnel_keys count from reader.
func ObserveTunnelKeys(reader client.Reader) {
	tunnelKeys.observe(func(ctx context.Context, ch chan<- prometheus.Metric) { countTunnelKeys(ctx, reader, ch) })
}

func countTunnelKeys(ctx context.Context, reader client.Reader, ch chan<- prometheus.Metric) {
	var tunnels tunav1.TunnelList
	if err := reader.List(ctx, &tunnels); err != nil {
		return // no figure rather than a wrong one
	}
	counts := map[string]float64{KeyIssued: 0, KeyPending: 0, KeyFailed: 0}
	for _, t := range tunnels.Items {
		counts[keyState(t.Status.Conditions)]++
	}
	for st, v := range counts {
		ch <- prometheus.MustNewConstMetric(tunnelKeysDesc, prometheus.GaugeValue, v, st)
	}
}

func keyState(conds []metav1.Condition) string {
	for _, c := range conds {
		if c.Type != tunav1.ConditionKeyIssued {
			continue
		}
		switch c.Status {
		case metav1.ConditionTrue:
			return KeyIssued
		case metav1.ConditionFalse:
			return KeyFailed
		}
	}
	return KeyPending
}
