package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// storeMetrics describe this node's use of the shared state store (etcd):
// how long its requests take and how often they fail, how often a
// transaction lost a race to another node, how late changes reach it
// through the watch, and how many nodes it sees. A single edge on bbolt
// exports them at zero.
type storeMetrics struct {
	requests  *prometheus.HistogramVec
	errors    *prometheus.CounterVec
	conflicts prometheus.Counter
	watchLag  prometheus.Histogram
	nodes     prometheus.Gauge
}

// storeOps are the op label's values.
var storeOps = []string{"read", "write", "watch"}

func newStoreMetrics(reg *prometheus.Registry) *storeMetrics {
	sm := &storeMetrics{
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tuna_edge_store_request_duration_seconds",
			Help:    "Latency of this node's requests to the state store (etcd), by op (read, write).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"op"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tuna_edge_store_errors_total",
			Help: "Failed requests to the state store (unreachable, no quorum, timeout), by op (read, write, watch).",
		}, []string{"op"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tuna_edge_store_conflicts_total",
			Help: "Store transactions run again because another node changed what they read.",
		}),
		watchLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tuna_edge_store_watch_lag_seconds",
			Help:    "Time from this node's heartbeat write to its arrival through the store's watch.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		nodes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tuna_edge_nodes", Help: "Live edge nodes this node sees (1 for a single edge).",
		}),
	}
	for _, op := range storeOps {
		sm.errors.WithLabelValues(op)
	}
	reg.MustRegister(sm.requests, sm.errors, sm.conflicts, sm.watchLag, sm.nodes)
	return sm
}

// StoreRequest records one request to the state store (store.Observer).
func (m *Metrics) StoreRequest(op string, d time.Duration, err error) {
	if m == nil {
		return
	}
	switch {
	case op == "conflict":
		m.store.conflicts.Inc()
	case err != nil:
		m.store.errors.WithLabelValues(op).Inc()
	case op != "watch":
		m.store.requests.WithLabelValues(op).Observe(d.Seconds())
	}
}

// StoreWatchLag records how late a change reached this node's watch
// (store.Observer).
func (m *Metrics) StoreWatchLag(d time.Duration) {
	if m != nil {
		m.store.watchLag.Observe(max(d, 0).Seconds())
	}
}

// Nodes sets the number of live nodes this node sees.
func (m *Metrics) Nodes(n int) {
	if m != nil {
		m.store.nodes.Set(float64(n))
	}
}
