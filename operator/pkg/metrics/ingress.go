package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics of Ingress hosts (agent). A host and a route's pattern ("Prefix
// /api", "Exact /healthz", "default"; "none" when no route matched) are
// bounded by the Ingress objects; request paths never become labels.
var (
	// IngressRouteUpdates counts route tables swapped into a running host.
	IngressRouteUpdates = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tuna_ingress_route_updates_total",
		Help: "Route tables applied to an Ingress host without reconnecting its tunnel.",
	}, []string{"host"})
	// IngressRoutes is the number of routes a host serves (defaultBackend
	// included).
	IngressRoutes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tuna_ingress_routes",
		Help: "Routes an Ingress host serves, its defaultBackend included.",
	}, []string{"host"})
	// IngressRequests counts requests by host, route and status code.
	IngressRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tuna_ingress_requests_total",
		Help: "HTTP requests served on an Ingress host, by route pattern and status code.",
	}, []string{"host", "route", "code"})
	// IngressRequestDuration observes the time to the end of each response.
	IngressRequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "tuna_ingress_request_duration_seconds",
		Help:    "Time from a request's arrival at the agent to the end of its response, by Ingress host.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
	}, []string{"host"})
)

func init() {
	crmetrics.Registry.MustRegister(IngressRouteUpdates, IngressRoutes, IngressRequests, IngressRequestDuration)
}

// ForgetIngressHost drops the series of a host no Ingress serves any more.
func ForgetIngressHost(host string) {
	l := prometheus.Labels{"host": host}
	IngressRouteUpdates.DeletePartialMatch(l)
	IngressRoutes.DeletePartialMatch(l)
	IngressRequests.DeletePartialMatch(l)
	IngressRequestDuration.DeletePartialMatch(l)
}
