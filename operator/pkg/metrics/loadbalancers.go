package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var lbMu sync.Mutex

var (
	lbServicesDesc = prometheus.NewDesc("tuna_loadbalancer_services",
		"LoadBalancer Services the operator publishes.", nil, nil)
	lbPortsDesc = prometheus.NewDesc("tuna_loadbalancer_ports",
		"Ports of published LoadBalancer Services by state: published (in status.loadBalancer), failed (listed with an error), pending (not listed).",
		[]string{"state"}, nil)
)

// LoadBalancers counts published LoadBalancer Services and their ports at
// scrape time from the controller's cache (Services of type LoadBalancer
// only), from their status.loadBalancer: the figure cannot drift from the
// objects.
type LoadBalancers struct {
	Reader client.Reader
	// Ours picks the Services the operator publishes.
	Ours func(*corev1.Service) bool
}

// Describe implements prometheus.Collector.
func (l *LoadBalancers) Describe(ch chan<- *prometheus.Desc) {
	ch <- lbServicesDesc
	ch <- lbPortsDesc
}

// Collect implements prometheus.Collector.
func (l *LoadBalancers) Collect(ch chan<- prometheus.Metric) {
	lbMu.Lock()
	reader, ours := l.Reader, l.Ours
	lbMu.Unlock()
	if reader == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list corev1.ServiceList
	if err := reader.List(ctx, &list); err != nil {
		return
	}
	services := 0.0
	ports := map[string]float64{"published": 0, "failed": 0, "pending": 0}
	for _, svc := range list.Items {
		if !ours(&svc) {
			continue
		}
		services++
		listed := map[int32]bool{}
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			for _, p := range ing.Ports {
				listed[p.Port] = true
				if p.Error != nil {
					ports["failed"]++
				} else {
					ports["published"]++
				}
			}
		}
		for _, p := range svc.Spec.Ports {
			if !listed[p.Port] {
				ports["pending"]++
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(lbServicesDesc, prometheus.GaugeValue, services)
	for st, v := range ports {
		ch <- prometheus.MustNewConstMetric(lbPortsDesc, prometheus.GaugeValue, v, st)
	}
}

var loadBalancers = &LoadBalancers{}

func init() { crmetrics.Registry.MustRegister(loadBalancers) }

// ObserveLoadBalancers makes tuna_loadbalancer_* count the Services of
// reader that ours picks.
func ObserveLoadBalancers(reader client.Reader, ours func(*corev1.Service) bool) {
	lbMu.Lock()
	loadBalancers.Reader, loadBalancers.Ours = reader, ours
	lbMu.Unlock()
}
