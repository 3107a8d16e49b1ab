package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

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

// TunnelKeys counts Tunnels by key state at scrape time from the
// controller's cache, as Reservations does: a refused key is a state that
// lasts until the spec changes, so a rate of failed calls would stop
// showing it after the first try.
type TunnelKeys struct {
	mu     sync.Mutex
	reader client.Reader
}

// Describe implements prometheus.Collector.
func (k *TunnelKeys) Describe(ch chan<- *prometheus.Desc) { ch <- tunnelKeysDesc }

// Collect implements prometheus.Collector.
func (k *TunnelKeys) Collect(ch chan<- prometheus.Metric) {
	k.mu.Lock()
	reader := k.reader
	k.mu.Unlock()
	if reader == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
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

var tunnelKeys = &TunnelKeys{}

func init() { crmetrics.Registry.MustRegister(tunnelKeys) }

// ObserveTunnelKeys makes tuna_tunnel_keys count from reader.
func ObserveTunnelKeys(reader client.Reader) {
	tunnelKeys.mu.Lock()
	tunnelKeys.reader = reader
	tunnelKeys.mu.Unlock()
}
