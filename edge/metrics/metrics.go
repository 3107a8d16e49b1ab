// Package metrics declares every Prometheus metric of tuna-edge in one place.
// Each Edge has its own registry, so several edges can live in one process
// (tests) without colliding on the global one. Labels are bounded: protocol,
// result code, HTTP status, direction and API route pattern — never hosts,
// client addresses or paths.
package metrics

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds the edge's collectors. A nil *Metrics is valid and records
// nothing, which keeps packages usable without wiring metrics.
type Metrics struct {
	reg               *prometheus.Registry
	sessions          prometheus.Gauge
	binds             *prometheus.CounterVec
	publicConnections *prometheus.CounterVec
	tcpForwards       *prometheus.CounterVec
	httpRequests      *prometheus.CounterVec
	bytes             *prometheus.CounterVec
	apiRequests       *prometheus.CounterVec
	limitRefusals     *prometheus.CounterVec
	secrets           prometheus.Gauge
	secretWatches     prometheus.Gauge
	channels          prometheus.Gauge
	inFlight          prometheus.Gauge
	store             *storeMetrics
}

// The edge's limits, as named in refusals and in the limit label of
// tuna_edge_limit_refusals_total.
const (
	// LimitHandshakes: SSH connections that have not finished logging in.
	LimitHandshakes = "handshakes"
	// LimitSessionsPerKey: live sessions of one tunnels:connect API key.
	LimitSessionsPerKey = "sessions_per_key"
	// LimitSessionsPerTunnelKey: live sessions in one tunnel key's pool.
	LimitSessionsPerTunnelKey = "sessions_per_tunnel_key"
	// LimitBindsPerSession: addresses bound by one session.
	LimitBindsPerSession = "binds_per_session"
	// LimitChannelsPerSession: open forward channels of one session.
	LimitChannelsPerSession = "channels_per_session"
	// LimitConnectionsPerTunnel: concurrent public connections (HTTP
	// requests) of one bound host or TCP endpoint.
	LimitConnectionsPerTunnel = "connections_per_tunnel"
	// LimitSecrets: the number of secrets the edge holds (--max-secrets).
	LimitSecrets = "secrets"
)

var allLimits = []string{LimitHandshakes, LimitSessionsPerKey, LimitSessionsPerTunnelKey, LimitBindsPerSession, LimitChannelsPerSession, LimitConnectionsPerTunnel, LimitSecrets}

// New creates and registers the edge's metrics.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tuna_edge_sessions", Help: "Live tunnel (SSH) sessions.",
		}),
		binds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tuna_edge_binds_total", Help: "Bind requests by protocol and result (ok or refusal code).",
		}, []string{"protocol", "result"}),
		publicConnections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tuna_edge_public_connections_total", Help: "Public connections forwarded into tunnels, by protocol.",
		}, []string{"protocol"}),
		tcpForwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tuna_edge_tcp_forwards_total", Help: "TCP endpoints' connections handed to an agent, by transport: stream (a TLS connection the agent dialled) or channel (inside the SSH session).",
		}, []string{"transport"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tuna_edge_http_requests_total", Help: "Public HTTP requests by response status code.",
		}, []string{"code"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tuna_edge_bytes_total", Help: "Bytes carried through tunnels; in = from public clients, out = to them.",
		}, []string{"direction"}),
		apiRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tuna_edge_api_requests_total", Help: "Control API requests by route pattern and status code.",
		}, []string{"route", "code"}),
		limitRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tuna_edge_limit_refusals_total", Help: "Connections, logins, binds, channels and new secrets refused by a limit, by limit.",
		}, []string{"limit"}),
		secrets: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tuna_edge_secrets", Help: "Secrets stored on the edge (a count only: never names or values).",
		}),
		secretWatches: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tuna_edge_secret_watches", Help: "Long polls of GET /v1/secrets waiting for a change.",
		}),
		channels: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tuna_edge_tunnel_channels", Help: "Open forward channels and streams of all tunnel sessions (idle kept channels included).",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tuna_edge_public_in_flight", Help: "Public HTTP requests in flight and TCP connections open: each holds a slot of its tunnel's connections_per_tunnel limit.",
		}),
	}
	// Every limit is exported from the start, at 0, so an alert on its
	// rate needs no "absent" clause.
	for _, l := range allLimits {
		m.limitRefusals.WithLabelValues(l)
	}
	m.reg.MustRegister(m.sessions, m.binds, m.publicConnections, m.tcpForwards, m.httpRequests, m.bytes, m.apiRequests, m.limitRefusals, m.secrets, m.secretWatches,
		m.channels, m.inFlight, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.store = newStoreMetrics(m.reg)
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Registry exposes the registry (for tests and embedding).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// SessionOpened and SessionClosed move the sessions gauge.
func (m *Metrics) SessionOpened() {
	if m != nil {
		m.sessions.Inc()
	}
}

// SessionClosed is the counterpart of SessionOpened.
func (m *Metrics) SessionClosed() {
	if m != nil {
		m.sessions.Dec()
	}
}

// Bind counts a bind request; result is "ok" or a protocol error code.
func (m *Metrics) Bind(protocol, result string) {
	if m != nil {
		m.binds.WithLabelValues(protocol, result).Inc()
	}
}

// PublicConnection counts a public connection forwarded into a tunnel.
func (m *Metrics) PublicConnection(protocol string) {
	if m != nil {
		m.publicConnections.WithLabelValues(protocol).Inc()
	}
}

// Transports of tuna_edge_tcp_forwards_total.
const (
	TransportStream  = "stream"
	TransportChannel = "channel"
)

// TCPForward counts a TCP connection handed to an agent over transport.
func (m *Metrics) TCPForward(transport string) {
	if m != nil {
		m.tcpForwards.WithLabelValues(transport).Inc()
	}
}

// HTTPRequest counts a public HTTP request by status.
func (m *Metrics) HTTPRequest(code int) {
	if m != nil {
		m.httpRequests.WithLabelValues(strconv.Itoa(code)).Inc()
	}
}

// Bytes counts bytes through tunnels; direction is "in" or "out".
func (m *Metrics) Bytes(direction string, n int) {
	if m != nil && n > 0 {
		m.bytes.WithLabelValues(direction).Add(float64(n))
	}
}

// APIRequest counts a control API call.
func (m *Metrics) APIRequest(route string, code int) {
	if m != nil {
		m.apiRequests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	}
}

// LimitRefused counts a refusal by one of the Limit* limits.
func (m *Metrics) LimitRefused(limit string) {
	if m != nil {
		m.limitRefusals.WithLabelValues(limit).Inc()
	}
}

// Secrets sets the number of stored secrets.
func (m *Metrics) Secrets(n int) {
	if m != nil {
		m.secrets.Set(float64(n))
	}
}

// SecretWatch moves the gauge of waiting long polls by delta (+1, -1).
func (m *Metrics) SecretWatch(delta int) {
	if m != nil {
		m.secretWatches.Add(float64(delta))
	}
}

// Channel moves the open channels gauge by delta (+1, -1).
func (m *Metrics) Channel(delta int) {
	if m != nil {
		m.channels.Add(float64(delta))
	}
}

// InFlight moves the gauge of public requests and connections holding a
// tunnel's slot by delta (+1, -1).
func (m *Metrics) InFlight(delta int) {
	if m != nil {
		m.inFlight.Add(float64(delta))
	}
}
