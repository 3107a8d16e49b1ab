package metrics

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// scraped is a collector that counts objects at scrape time, from the
// controller's cache: the figure can never drift from the objects. It is
// registered once per process; the controller points it at its cache when
// it starts (again, in tests that restart it). Until then it reports
// nothing, as it does when a list fails: no figure rather than a wrong one.
type scraped struct {
	descs   []*prometheus.Desc
	collect atomic.Pointer[func(ctx context.Context, ch chan<- prometheus.Metric)]
}

// newScraped registers a collector of descs.
func newScraped(descs ...*prometheus.Desc) *scraped {
	s := &scraped{descs: descs}
	crmetrics.Registry.MustRegister(s)
	return s
}

// observe makes the collector count with collect from now on.
func (s *scraped) observe(collect func(ctx context.Context, ch chan<- prometheus.Metric)) {
	s.collect.Store(&collect)
}

// Describe implements prometheus.Collector.
func (s *scraped) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range s.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (s *scraped) Collect(ch chan<- prometheus.Metric) {
	collect := s.collect.Load()
	if collect == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	(*collect)(ctx, ch)
}
