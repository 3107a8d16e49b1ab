package dashboards

import (
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// ns is the selector of the operator's series: Prometheus' target label
// namespace (the ServiceMonitor's, or a kubernetes_sd relabeling's). The
// metrics' own namespace label is therefore exported_namespace.
const ns = `namespace=~"$namespace"`

// op puts the operator's selector into each {} of expr.
func op(expr string) string { return strings.ReplaceAll(expr, "{}", "{"+ns+"}") }

// opSel is op for selectors that already have matchers: {state="x"}.
func opSel(expr string) string { return strings.ReplaceAll(expr, "{", "{"+ns+", ") }

// Operator is the dashboard of the controller and the agent.
func Operator() (dashboard.Dashboard, error) {
	rate := func(m string) string { return "rate(" + m + "{" + ns + "}[$__rate_interval])" }
	return build(base("tuna-k8s-operator", "Tuna Kubernetes operator",
		"Tunnels, Ingress hosts, reservations, LoadBalancer Services, the edge API and reconciliation of the tuna-k8s-operator (controller and agent).",
		"tuna", "kubernetes").
		WithVariable(labelVariable("namespace", "Operator namespace", "controller_runtime_reconcile_total", ".*")).
		WithRow(row("Tunnels")).
		WithPanel(single("Tunnels connected", "Tunnels and Ingress hosts of the agent with a live edge session.", 5,
			q(op(`sum(tuna_tunnels_connected{})`), ""))).
		WithPanel(single("Tunnels not connected", "Tunnels and Ingress hosts the agent runs without a live edge session (alert TunaTunnelDown).", 5,
			q(op(`count(tuna_tunnel_up{} == 0) or vector(0)`), ""), above(1, "red"))).
		WithPanel(single("Tunnel keys refused", "Tunnels whose key the edge refused: KeyIssued=False (alert TunaTunnelKeysNotIssued).", 4,
			q(opSel(`sum(tuna_tunnel_keys{state="failed"})`), ""), above(1, "red"))).
		WithPanel(single("Reservations ready", "Domains and TCPEndpoints that are Ready (reserved or adopted).", 5,
			q(opSel(`sum(max by (kind, state) (tuna_reservations{state=~"ready|adopted"}))`), ""))).
		WithPanel(single("Reservations pending or failed", "Domains and TCPEndpoints waiting for DNS or refused by the edge.", 5,
			q(opSel(`sum(max by (kind, state) (tuna_reservations{state=~"pending|failed"}))`), ""), above(1, "orange"))).
		WithPanel(graph("Tunnel up", "1 while the tunnel has a live edge session, 0 while the agent is connecting. Ingress hosts show with an empty namespace.", "short",
			q(op(`max by (exported_namespace, name) (tuna_tunnel_up{})`), "{{exported_namespace}}/{{name}}")).Min(0).Max(1)).
		WithPanel(graph("Sessions per tunnel", "Live edge sessions serving each tunnel or Ingress host.", "short",
			q(op(`sum by (exported_namespace, name) (tuna_tunnel_sessions{})`), "{{exported_namespace}}/{{name}}")).Min(0)).
		WithPanel(graph("Session attempts", "Attempts to open an edge session: first connects and reconnects.", "ops",
			q(`sum by (kind) (`+rate("tuna_tunnel_connect_attempts_total")+`)`, "{{kind}}"))).
		WithPanel(graph("Tunnel keys by state", "Tunnels by their KeyIssued condition: issued, pending (no answer from the edge yet), failed (refused).", "short",
			q(op(`sum by (state) (tuna_tunnel_keys{})`), "{{state}}")).Min(0)).
		WithRow(row("Traffic")).
		WithPanel(graph("Requests by tunnel", "HTTP requests the agent served per Tunnel.", "reqps",
			q(`sum by (exported_namespace, name) (`+rate("tuna_tunnel_requests_total")+`)`, "{{exported_namespace}}/{{name}}"))).
		WithPanel(graph("Requests by status class", "HTTP requests through all tunnels by status class.", "reqps",
			q(`sum by (code) (`+rate("tuna_tunnel_requests_total")+`)`, "{{code}}"))).
		WithPanel(graph("Request latency (p95)", "95th percentile from a request's arrival at the agent to the end of its response, per Tunnel.", "s",
			q(`histogram_quantile(0.95, sum by (le, exported_namespace, name) (`+rate("tuna_tunnel_request_duration_seconds_bucket")+`))`, "{{exported_namespace}}/{{name}}"))).
		WithPanel(graph("Bytes through tunnels", "Payload bytes: in from public clients, out to them.", "Bps",
			q(`sum by (direction) (`+rate("tuna_tunnel_bytes_total")+`)`, "{{direction}}"))).
		WithRow(row("Ingress and Gateway hosts")).
		WithPanel(graph("Ingress requests by host", "HTTP requests served on each host of a tuna Ingress or Gateway listener.", "reqps",
			q(`sum by (host) (`+rate("tuna_ingress_requests_total")+`)`, "{{host}}"))).
		WithPanel(graph("Ingress requests by route and code", "Requests by host, route (an Ingress pattern: Prefix /api, Exact /healthz, default; an HTTPRoute rule: HTTPRoute <namespace>/<name> rule <n>; none: nothing matched) and status code.", "reqps",
			q(`sum by (host, route, code) (`+rate("tuna_ingress_requests_total")+`)`, "{{host}} {{route}} {{code}}"))).
		WithPanel(graph("Ingress latency (p50, p95)", "Time from a request's arrival at the agent to the end of its response, per Ingress host.", "s",
			q(`histogram_quantile(0.95, sum by (le, host) (`+rate("tuna_ingress_request_duration_seconds_bucket")+`))`, "p95 {{host}}"),
			q(`histogram_quantile(0.5, sum by (le, host) (`+rate("tuna_ingress_request_duration_seconds_bucket")+`))`, "p50 {{host}}"))).
		WithPanel(bars("Route updates by host", "Route tables swapped into a running Ingress or Gateway host (Ingress paths and HTTPRoute rules) without reconnecting its tunnel.",
			q(`sum by (host) (increase(tuna_ingress_route_updates_total{`+ns+`}[$__rate_interval]))`, "{{host}}"))).
		WithPanel(graph("Routes per host", "Size of each Ingress host's route table, its defaultBackend included.", "short",
			q(op(`max by (host) (tuna_ingress_routes{})`), "{{host}}")).Min(0)).
		WithRow(row("Controller and edge API")).
		WithPanel(graph("Tunnel keys issued and revoked", "Ephemeral tunnel keys the controller issued and revoked on the edge.", "ops",
			q(`sum(`+rate("tuna_tunnel_keys_issued_total")+`)`, "issued"),
			q(`sum(`+rate("tuna_tunnel_keys_revoked_total")+`)`, "revoked"))).
		WithPanel(graph("Reservations by state", "Domains and TCPEndpoints by kind and state.", "short",
			q(op(`max by (kind, state) (tuna_reservations{})`), "{{kind}} {{state}}")).Min(0)).
		WithPanel(graph("Edge API calls by result", "The controller's calls to the edge control API: 2xx, 4xx, 429, 5xx, error (no answer). Alert TunaEdgeAPIFailing.", "reqps",
			q(`sum by (result) (`+rate("tuna_edge_api_calls_total")+`)`, "{{result}}"))).
		WithPanel(graph("Edge API latency (p95)", "95th percentile of edge API call latency by operation.", "s",
			q(`histogram_quantile(0.95, sum by (le, operation) (`+rate("tuna_edge_api_call_duration_seconds_bucket")+`))`, "{{operation}}"))).
		WithRow(row("Reconciliation")).
		WithPanel(graph("Reconciles by result", "Reconciles per controller and result (success, error, requeue, requeue_after).", "ops",
			q(`sum by (controller, result) (`+rate("controller_runtime_reconcile_total")+`)`, "{{controller}} {{result}}"))).
		WithPanel(graph("Reconcile errors", "Reconciles that returned an error, per controller; the work queue retries them with backoff. Alert TunaReconcileErrors.", "ops",
			q(`sum by (controller) (`+rate("controller_runtime_reconcile_errors_total")+`)`, "{{controller}}"))).
		WithPanel(graph("Reconcile time (p50, p99)", "Time per reconcile.", "s",
			q(`histogram_quantile(0.99, sum by (le, controller) (`+rate("controller_runtime_reconcile_time_seconds_bucket")+`))`, "p99 {{controller}}"),
			q(`histogram_quantile(0.5, sum by (le, controller) (`+rate("controller_runtime_reconcile_time_seconds_bucket")+`))`, "p50 {{controller}}"))).
		WithPanel(graph("Work queue depth", "Objects waiting in each controller's work queue.", "short",
			q(op(`sum by (name) (workqueue_depth{})`), "{{name}}")).Min(0)).
		WithRow(row("Secret sync")).
		WithPanel(graph("SecretSync runs by result", "updated (Secret written), unchanged, refused (Ready=False), failed (edge unreachable, Secret kept).", "ops",
			q(`sum by (result) (`+rate("tuna_secret_syncs_total")+`)`, "{{result}}"))).
		WithPanel(graph("Age of synced Secrets", "Time since each SecretSync last found or made its Secret equal to the edge's secrets.", "s",
			q(op(`max by (exported_namespace, name) (time() - tuna_secret_sync_last_success_timestamp_seconds{})`), "{{exported_namespace}}/{{name}}"))).
		WithRow(row("LoadBalancer Services")).
		WithPanel(single("LoadBalancer Services published", "Services of type LoadBalancer (class k8s.tuna.am/tuna, or classless with loadBalancer.classless) that the operator publishes.", 6,
			q(op(`max(tuna_loadbalancer_services{})`), ""))).
		WithPanel(graph("LoadBalancer ports by state", "Ports of published LoadBalancer Services: published (in status.loadBalancer), failed (listed with an error: see the Service's events), pending (not listed yet). Each port is a Tunnel named after the Service and the port, in the panels above.", "short",
			q(op(`max by (state) (tuna_loadbalancer_ports{})`), "{{state}}")).Min(0)))
}
