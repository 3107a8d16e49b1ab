package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

var reservationsDesc = prometheus.NewDesc("tuna_reservations",
	"Domains and TCPEndpoints by kind and state (ready, adopted, pending, failed).",
	[]string{"kind", "state"}, nil)

// reservations counts Domains and TCPEndpoints by state.
var reservations = newScraped(reservationsDesc)

// ObserveReservations makes tuna_reservations count from reader.
func ObserveReservations(reader client.Reader) {
	reservations.observe(func(ctx context.Context, ch chan<- prometheus.Metric) { countReservations(ctx, reader, ch) })
}

func countReservations(ctx context.Context, reader client.Reader, ch chan<- prometheus.Metric) {
	counts := map[[2]string]float64{}
	for _, kind := range []string{"Domain", "TCPEndpoint"} {
		for _, st := range []string{"ready", "adopted", "pending", "failed"} {
			counts[[2]string{kind, st}] = 0
		}
	}
	var domains tunav1.DomainList
	if err := reader.List(ctx, &domains); err == nil {
		for _, d := range domains.Items {
			counts[[2]string{"Domain", state(d.Status.Conditions, d.Status.Adopted)}]++
		}
	}
	var endpoints tunav1.TCPEndpointList
	if err := reader.List(ctx, &endpoints); err == nil {
		for _, e := range endpoints.Items {
			counts[[2]string{"TCPEndpoint", state(e.Status.Conditions, e.Status.Adopted)}]++
		}
	}
	for k, v := range counts {
		ch <- prometheus.MustNewConstMetric(reservationsDesc, prometheus.GaugeValue, v, k[0], k[1])
	}
}

func state(conds []metav1.Condition, adopted bool) string {
	for _, c := range conds {
		if c.Type != tunav1.ConditionReady {
			continue
		}
		switch {
		case c.Status == metav1.ConditionTrue && adopted:
			return "adopted"
		case c.Status == metav1.ConditionTrue:
			return "ready"
		case c.Reason == tunav1.ReasonDNSPending:
			return "pending"
		}
		return "failed"
	}
	return "pending"
}
