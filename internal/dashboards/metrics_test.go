package dashboards

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// exportedMetrics are the metric names the operator exports, which the
// operator's Grafana dashboard may use.
//
// Keep in sync with operator/pkg/metrics (the tuna_* metrics; a test below
// checks each tuna_* name here against that package's source) and with
// controller-runtime's built-in metrics. Add a metric here when a dashboard
// panel starts using it; histograms are listed by the series used
// (_bucket, _sum, _count).
var exportedMetrics = []string{
	// operator/pkg/metrics
	"tuna_tunnels_connected",
	"tuna_tunnel_up",
	"tuna_tunnel_sessions",
	"tuna_tunnel_connect_attempts_total",
	"tuna_tunnel_requests_total",
	"tuna_tunnel_request_duration_seconds_bucket",
	"tuna_tunnel_bytes_total",
	"tuna_tunnel_keys_issued_total",
	"tuna_tunnel_keys_revoked_total",
	"tuna_tunnel_keys",
	"tuna_edge_api_calls_total",
	"tuna_edge_api_call_duration_seconds_bucket",
	"tuna_reservations",
	"tuna_loadbalancer_services",
	"tuna_loadbalancer_ports",
	"tuna_ingress_requests_total",
	"tuna_ingress_request_duration_seconds_bucket",
	"tuna_ingress_route_updates_total",
	"tuna_ingress_routes",
	"tuna_secret_syncs_total",
	"tuna_secret_sync_last_success_timestamp_seconds",
	// controller-runtime (sigs.k8s.io/controller-runtime/pkg/internal/controller/metrics, workqueue)
	"controller_runtime_reconcile_total",
	"controller_runtime_reconcile_errors_total",
	"controller_runtime_reconcile_time_seconds_bucket",
	"workqueue_depth",
}

// edgeExportedMetrics are the metric names tuna-edge exports, which the
// edge's dashboard may use: edge/metrics (checked against its source
// below) and client_golang's Go and process collectors, which it
// registers.
var edgeExportedMetrics = []string{
	// edge/metrics
	"tuna_edge_sessions",
	"tuna_edge_binds_total",
	"tuna_edge_public_connections_total",
	"tuna_edge_http_requests_total",
	"tuna_edge_bytes_total",
	"tuna_edge_api_requests_total",
	"tuna_edge_limit_refusals_total",
	"tuna_edge_secrets",
	"tuna_edge_secret_watches",
	"tuna_edge_tunnel_channels",
	"tuna_edge_public_in_flight",
	// client_golang collectors.NewGoCollector, NewProcessCollector
	"go_goroutines",
	"process_resident_memory_bytes",
}

// shippedDashboards maps each dashboard file (File.Path) to the metrics it
// may use.
var shippedDashboards = map[string][]string{
	"chart/tuna-k8s-operator/dashboards/tuna-k8s-operator.json": exportedMetrics,
	"edge/deploy/monitoring/tuna-edge.json":                     edgeExportedMetrics,
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promVariable = regexp.MustCompile(`\$\{?\w+\}?`)
	promIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	labelValues  = regexp.MustCompile(`label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,`)
	promKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
		"and", "or", "unless", "inf", "nan", "Inf", "NaN"}
)

// promMetricNames returns the metric names a PromQL expression selects:
// identifiers that are not functions, keywords, label names (in matchers
// or groupings), strings, durations or Grafana variables.
func promMetricNames(expr string) []string {
	s := promString.ReplaceAllString(expr, `""`)
	s = promMatchers.ReplaceAllString(s, " ")
	s = promRange.ReplaceAllString(s, " ")
	s = promGrouping.ReplaceAllString(s, " ")
	s = promVariable.ReplaceAllString(s, " ")
	var out []string
	for _, loc := range promIdent.FindAllStringIndex(s, -1) {
		name := s[loc[0]:loc[1]]
		if loc[0] > 0 && strings.ContainsAny(s[loc[0]-1:loc[0]], "0123456789.") {
			continue // exponent or unit of a number (1e3)
		}
		if rest := strings.TrimLeft(s[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue // a function
		}
		if slices.Contains(promKeywords, name) {
			continue
		}
		out = append(out, name)
	}
	return out
}

func TestPromMetricNames(t *testing.T) {
	tests := map[string][]string{
		`sum by (kind) (rate(tuna_tunnel_connect_attempts_total{namespace=~"$namespace", kind!="x"}[$__rate_interval]))`: {"tuna_tunnel_connect_attempts_total"},
		`histogram_quantile(0.99, sum by (le, controller) (rate(a_bucket{x="y{}"}[5m])))`:                                {"a_bucket"},
		`a / on (pod) group_left(node) b > 1e3 or vector(0)`:                                                             {"a", "b"},
		`sum(x) without (instance) - ignoring(job) y offset 5m`:                                                          {"x", "y"},
		`count(up_x{a="b"} == 0) or vector(0)`:                                                                           {"up_x"},
	}
	for expr, want := range tests {
		if got := promMetricNames(expr); !slices.Equal(got, want) {
			t.Errorf("promMetricNames(%q) = %v, want %v", expr, got, want)
		}
	}
}

// dashboardMetrics returns the metric names used by every PromQL expression
// of a dashboard (panel targets and template variables), per panel title.
func dashboardMetrics(t *testing.T, file string) (perPanel map[string][]string, all []string) {
	t.Helper()
	var dash map[string]any
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(file)))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	perPanel = map[string][]string{}
	var walk func(v any, panel string)
	walk = func(v any, panel string) {
		switch v := v.(type) {
		case map[string]any:
			if typ, _ := v["type"].(string); typ != "" && typ != "row" && v["gridPos"] != nil {
				panel, _ = v["title"].(string)
				perPanel[panel] = perPanel[panel][:0:0]
			}
			for k, c := range v {
				if s, ok := c.(string); ok && k == "expr" {
					names := promMetricNames(s)
					perPanel[panel] = append(perPanel[panel], names...)
					all = append(all, names...)
					continue
				}
				walk(c, panel)
			}
		case []any:
			for _, c := range v {
				walk(c, panel)
			}
		case string:
			for _, m := range labelValues.FindAllStringSubmatch(v, -1) {
				all = append(all, m[1])
			}
		}
	}
	walk(dash, "")
	return perPanel, all
}

// Every panel of every dashboard queries only metrics the code exports.
func TestDashboardUsesOnlyExportedMetrics(t *testing.T) {
	for _, f := range Files {
		if _, ok := shippedDashboards[f.Path]; !ok {
			t.Errorf("%s has no entry in shippedDashboards", f.Path)
		}
	}
	for file, exported := range shippedDashboards {
		t.Run(file, func(t *testing.T) {
			perPanel, all := dashboardMetrics(t, file)
			if len(perPanel) < 5 {
				t.Fatalf("found %d panels", len(perPanel))
			}
			for panel, names := range perPanel {
				if len(names) == 0 {
					t.Errorf("panel %q queries no metric", panel)
				}
			}
			for _, name := range all {
				if !slices.Contains(exported, name) {
					t.Errorf("the dashboard uses %s, which its list of exported metrics lacks: is it exported by the code?", name)
				}
			}
			for _, name := range exported {
				if !slices.Contains(all, name) {
					t.Logf("exported metric %s is not on the dashboard", name)
				}
			}
		})
	}
}

// The tuna_* names of exportedMetrics are declared in operator/pkg/metrics.
func TestExportedMetricsMatchOperatorSource(t *testing.T) {
	checkDeclared(t, exportedMetrics, "operator", "pkg", "metrics")
}

// The tuna_* names of edgeExportedMetrics are declared in edge/metrics.
func TestExportedMetricsMatchEdgeSource(t *testing.T) {
	checkDeclared(t, edgeExportedMetrics, "edge", "metrics")
}

// checkDeclared checks that every tuna_* name of names is declared in the
// Go source of the package at dir (relative to the repository).
func checkDeclared(t *testing.T, names []string, dir ...string) {
	t.Helper()
	pkg := filepath.Join(append([]string{"..", ".."}, dir...)...)
	files, err := filepath.Glob(filepath.Join(pkg, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: %v %v", pkg, files, err)
	}
	declared := map[string]bool{}
	// Name: "..." in *Opts, or the first argument of prometheus.NewDesc.
	nameField := regexp.MustCompile(`(?:Name:|NewDesc\()\s*"([A-Za-z_:][A-Za-z0-9_:]*)"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range nameField.FindAllStringSubmatch(string(src), -1) {
			declared[m[1]] = true
		}
	}
	for _, name := range names {
		if !strings.HasPrefix(name, "tuna_") {
			continue
		}
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && declared[b] {
				base = b
			}
		}
		if !declared[base] {
			t.Errorf("the list of exported metrics has %s, which %s does not declare (declared: %v)", name, pkg, declared)
		}
	}
}
