package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var (
	lbServicesDesc = prometheus.NewDesc("tuna_loadbalancer_services",
		"LoadBalancer Services the operator publishes.", nil, nil)
	lbPortsDesc = prometheus.NewDesc("tuna_loadbalancer_ports",
		"Ports of published LoadBalancer Services by state: published (in status.loadBalancer), failed (listed with an error), pending (not listed).",
		[]string{"state"}, nil)
)

// loadBalancers counts published LoadBalancer Services and their ports
// (Services of type LoadBalancer only), from their status.loadBalancer.
var loadBalancers = newScraped(lbServicesDesc, lbPortsDesc)

// ObserveLoadBalancers makes tuna_loadbalancer_* count the Services of
// reader that ours picks.
func ObserveLoadBalancers(reader client.Reader, ours func(*corev1.Service) bool) {
	loadBalancers.observe(func(ctx context.Context, ch chan<- prometheus.Metric) { countLoadBalancers(ctx, reader, ours, ch) })
}

func countLoadBalancers(ctx context.Context, reader client.Reader, ours func(*corev1.Service) bool, ch chan<- prometheus.Metric) {
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
