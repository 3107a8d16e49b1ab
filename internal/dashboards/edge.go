package dashboards

import (
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// inst selects the edge's series by the $instance variable, whose All is
// the list of instances that export tuna_edge_sessions: process_* and
// go_* series of other jobs stay out.
const inst = `instance=~"$instance"`

// edge puts the instance selector into each {} of expr.
func edge(expr string) string { return strings.ReplaceAll(expr, "{}", "{"+inst+"}") }

// Edge is the dashboard of tuna-edge, which ships with the edge
// (edge/deploy/monitoring/, beside its alert rules): sessions, binds,
// public traffic, the control API and the limits. The edge may run outside the cluster
// (a VPS): its series are told apart by instance only.
func Edge() (dashboard.Dashboard, error) {
	rate := func(m string) string { return "rate(" + m + "{" + inst + "}[$__rate_interval])" }
	return build(base("tuna-edge", "Tuna edge",
		"The tuna-edge: tunnel sessions, binds, public connections and bytes, control API requests and limit refusals.",
		"tuna", "edge").
		WithVariable(labelVariable("instance", "Edge instance", "tuna_edge_sessions", "")).
		WithRow(row("Sessions")).
		WithPanel(single("Live sessions", "Tunnel (SSH) sessions open now.", 6,
			q(edge(`sum(tuna_edge_sessions{})`), ""))).
		WithPanel(single("Refused binds (1h)", "Bind requests the edge refused in the last hour.", 6,
			q(`sum(increase(tuna_edge_binds_total{`+inst+`, result!="ok"}[1h])) or vector(0)`, ""), above(1, "orange"))).
		WithPanel(single("Limit refusals (1h)", "Connections, logins, binds, channels and new secrets refused by a limit in the last hour (alert TunaEdgeLimitRefusals).", 6,
			q(edge(`sum(increase(tuna_edge_limit_refusals_total{}[1h]))`), ""), above(1, "orange"))).
		WithPanel(single("Secrets stored", "Secrets the edge holds (a count only).", 6,
			q(edge(`sum(tuna_edge_secrets{})`), ""))).
		WithPanel(graph("Sessions", "Live tunnel sessions per edge instance.", "short",
			q(edge(`sum by (instance) (tuna_edge_sessions{})`), "{{instance}}")).Min(0)).
		WithPanel(graph("Binds by result", "Bind requests by protocol and result: ok or the refusal code.", "ops",
			q(`sum by (protocol, result) (`+rate("tuna_edge_binds_total")+`)`, "{{protocol}} {{result}}"))).
		WithRow(row("Public traffic")).
		WithPanel(graph("Public connections", "Public connections forwarded into tunnels, by protocol.", "ops",
			q(`sum by (protocol) (`+rate("tuna_edge_public_connections_total")+`)`, "{{protocol}}"))).
		WithPanel(graph("Public HTTP requests by code", "Public HTTP requests by response status (404: no live tunnel for the host).", "reqps",
			q(`sum by (code) (`+rate("tuna_edge_http_requests_total")+`)`, "{{code}}"))).
		WithPanel(graph("Bytes through tunnels", "Bytes carried through tunnels: in from public clients, out to them.", "Bps",
			q(`sum by (direction) (`+rate("tuna_edge_bytes_total")+`)`, "{{direction}}"))).
		WithPanel(graph("Memory and goroutines", "Resident memory of the edge process, and its goroutines (about two per open connection).", "bytes",
			q(edge(`max by (instance) (process_resident_memory_bytes{})`), "rss {{instance}}"),
			q(edge(`max by (instance) (go_goroutines{})`), "goroutines {{instance}}")).
			OverrideByRegexp("^goroutines .*", []dashboard.DynamicConfigValue{{Id: "unit", Value: "short"}, {Id: "custom.axisPlacement", Value: "right"}})).
		WithRow(row("Control API")).
		WithPanel(graph("API requests by code", "Control API requests by status code: 401/403 bad keys, 429 the per-key rate limit, 413 bodies too large.", "reqps",
			q(`sum by (code) (`+rate("tuna_edge_api_requests_total")+`)`, "{{code}}"))).
		WithPanel(graph("API requests by route", "Control API requests by route pattern.", "reqps",
			q(`sum by (route) (`+rate("tuna_edge_api_requests_total")+`)`, "{{route}}"))).
		WithRow(row("Limits and secrets")).
		WithPanel(bars("Limit refusals", "Refusals by limit: handshakes, sessions_per_key, binds_per_session, channels_per_session, connections_per_tunnel, secrets.",
			q(`sum by (limit) (`+rate("tuna_edge_limit_refusals_total")+`)`, "{{limit}}"))).
		WithPanel(graph("Secret watches", "Long polls of GET /v1/secrets waiting for a change (one per SecretSync key of each operator).", "short",
			q(edge(`sum(tuna_edge_secret_watches{})`), "watches")).Min(0)))
}
