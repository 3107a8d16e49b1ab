package chart

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The operator's dashboard ships as a ConfigMap for the Grafana sidecar,
// holding its file of dashboards/ unchanged; the label the sidecar selects
// by is configurable, and the dashboard can be left out. The edge's ships
// with the edge: the chart has none, and says so to a values file that
// still asks for it.
func TestDashboardConfigMaps(t *testing.T) {
	files := map[string]string{
		testFullname + "-dashboard": "tuna-k8s-operator.json",
	}
	r := render(t, withKey(t, "metrics.dashboard.annotations.grafana_folder=Tuna"))
	for name, file := range files {
		m := r.Find("ConfigMap", name)
		if m == nil {
			t.Fatalf("no ConfigMap %s by default", name)
		}
		var cm corev1.ConfigMap
		if err := m.Into(&cm); err != nil {
			t.Fatal(err)
		}
		if cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "Tuna" || cm.Namespace != DefaultNamespace {
			t.Errorf("%s: labels %v, annotations %v, namespace %s", name, cm.Labels, cm.Annotations, cm.Namespace)
		}
		if len(cm.Data) != 1 || cm.Data[file] != strings.TrimSuffix(string(readChartFile(t, "dashboards/"+file)), "\n") {
			t.Errorf("%s does not hold dashboards/%s as it is (keys %v)", name, file, slices.Collect(maps.Keys(cm.Data)))
		}
		var dash struct {
			UID    string `json:"uid"`
			Panels []any  `json:"panels"`
		}
		if err := json.Unmarshal([]byte(cm.Data[file]), &dash); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if dash.UID == "" || len(dash.Panels) < 10 {
			t.Errorf("%s: uid %q, %d panels", file, dash.UID, len(dash.Panels))
		}
	}

	if r.Find("ConfigMap", testFullname+"-edge-dashboard") != nil {
		t.Error("the chart renders the edge's dashboard, which ships with the edge")
	}
	renderFails(t, withKey(t, "metrics.dashboard.edge=true"), "edge/deploy/monitoring/tuna-edge.json")
	r = render(t, withKey(t, "metrics.dashboard.label=grafana.io/dashboard", "metrics.dashboard.labelValue=tuna"))
	var cm corev1.ConfigMap
	if err := r.Find("ConfigMap", testFullname+"-dashboard").Into(&cm); err != nil {
		t.Fatal(err)
	}
	if cm.Labels["grafana.io/dashboard"] != "tuna" || cm.Labels["grafana_dashboard"] != "" {
		t.Errorf("custom sidecar label: %v", cm.Labels)
	}
	r = render(t, withKey(t, "metrics.dashboard.enabled=false"))
	for name := range files {
		if r.Find("ConfigMap", name) != nil {
			t.Errorf("metrics.dashboard.enabled=false still renders %s", name)
		}
	}
	renderFails(t, withKey(t, "metrics.dashboard.label=bad label"), "/metrics/dashboard/label")
}

// alertRule is one rule of the rendered PrometheusRule.
type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type ruleGroup struct {
	Name  string      `json:"name"`
	Rules []alertRule `json:"rules"`
}

// The monitoring example turns on what kube-prometheus-stack picks up.
func TestMonitoringExample(t *testing.T) {
	values, err := common.ReadValues(readChartFile(t, "examples/values-monitoring.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r := render(t, values)
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		m := r.Find(kind, testFullname)
		if m == nil || m.Object.GetLabels()["release"] != "kube-prometheus-stack" {
			t.Errorf("%s: %v", kind, m)
		}
	}
	if groups := prometheusRule(t, r); len(groups) != 1 || groups[0].Rules[0].Labels["team"] != "platform" {
		t.Errorf("rule groups %+v", groups)
	}
	if m := r.Find("ConfigMap", testFullname+"-dashboard"); m == nil || m.Object.GetAnnotations()["grafana_folder"] != "Tuna" {
		t.Errorf("dashboard: %v", m)
	}
}

func prometheusRule(t *testing.T, r *Rendered) []ruleGroup {
	t.Helper()
	m := r.Find("PrometheusRule", testFullname)
	if m == nil {
		t.Fatalf("no PrometheusRule; rendered: %v", r.Sources())
	}
	if m.Object.GetAPIVersion() != "monitoring.coreos.com/v1" || m.Namespace() != DefaultNamespace {
		t.Errorf("PrometheusRule %s in %s", m.Object.GetAPIVersion(), m.Namespace())
	}
	b, err := json.Marshal(m.Object.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Groups []ruleGroup `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(b, &spec); err != nil {
		t.Fatalf("spec: %v", err)
	}
	return spec.Groups
}

// The alerts: off by default; on, every alert of values.yaml is there with
// its for, severity, runbook and the release's selector; each can be tuned
// or left out. That the rules load and fire is tests/observability's job.
func TestPrometheusRule(t *testing.T) {
	if m := render(t, withKey(t)).Find("PrometheusRule", testFullname); m != nil {
		t.Error("a PrometheusRule is rendered by default")
	}
	want := map[string][2]string{ // alert: for, severity (values.yaml defaults)
		"TunaTunnelDown":          {"5m", "warning"},
		"TunaTunnelKeysNotIssued": {"10m", "warning"},
		"TunaEdgeAPIFailing":      {"10m", "critical"},
		"TunaReconcileErrors":     {"15m", "warning"},
	}
	groups := prometheusRule(t, render(t, withKey(t, "metrics.prometheusRule.enabled=true",
		"metrics.prometheusRule.labels.release=kube-prometheus-stack", "metrics.prometheusRule.alertLabels.team=platform")))
	if len(groups) != 1 || groups[0].Name != "tuna-k8s-operator" {
		t.Fatalf("groups %+v", groups)
	}
	seen := map[string]bool{}
	for _, g := range groups {
		for _, r := range g.Rules {
			seen[r.Alert] = true
			w, ok := want[r.Alert]
			if !ok {
				t.Errorf("unexpected alert %s: add it to this test and to docs/operations.md", r.Alert)
				continue
			}
			if r.For != w[0] || r.Labels["severity"] != w[1] || r.Labels["team"] != "platform" {
				t.Errorf("%s: for %s, labels %v; want for %s, severity %s, team platform", r.Alert, r.For, r.Labels, w[0], w[1])
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" ||
				r.Annotations["runbook_url"] != "https://code.tuna.am/tuna/k8s-operator/blob/main/docs/operations.md#"+strings.ToLower(r.Alert) {
				t.Errorf("%s: annotations %v", r.Alert, r.Annotations)
			}
			if !strings.Contains(r.Expr, `namespace="`+DefaultNamespace+`"`) {
				t.Errorf("%s does not select the release's namespace: %s", r.Alert, r.Expr)
			}
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("alert %s is not rendered", name)
		}
	}
	if l := render(t, withKey(t, "metrics.prometheusRule.enabled=true", "metrics.prometheusRule.labels.release=kube-prometheus-stack")).
		Find("PrometheusRule", testFullname).Object.GetLabels(); l["release"] != "kube-prometheus-stack" {
		t.Errorf("PrometheusRule labels %v", l)
	}

	groups = prometheusRule(t, render(t, withKey(t, "metrics.prometheusRule.enabled=true",
		`metrics.prometheusRule.selector=job=~"tuna-.*"`,
		"metrics.prometheusRule.alerts.TunaTunnelDown.for=1m", "metrics.prometheusRule.alerts.TunaReconcileErrors.enabled=false",
		"metrics.prometheusRule.runbookURL=")))
	for _, g := range groups {
		for _, r := range g.Rules {
			sel := `{job=~"tuna-.*"`
			if !strings.Contains(r.Expr, sel) || strings.Contains(r.Expr, "namespace=") {
				t.Errorf("%s: %s does not use the selector %s", r.Alert, r.Expr, sel)
			}
			if r.Alert == "TunaReconcileErrors" {
				t.Error("a disabled alert is rendered")
			}
			if r.Alert == "TunaTunnelDown" && r.For != "1m" {
				t.Errorf("TunaTunnelDown for %s, want 1m", r.For)
			}
			if _, ok := r.Annotations["runbook_url"]; ok {
				t.Errorf("%s has a runbook_url with runbookURL empty", r.Alert)
			}
		}
	}

	// Every alert off: the groups go, the object stays valid.
	sets := []string{"metrics.prometheusRule.enabled=true"}
	for name := range want {
		sets = append(sets, "metrics.prometheusRule.alerts."+name+".enabled=false")
	}
	if groups := prometheusRule(t, render(t, withKey(t, sets...))); len(groups) != 0 {
		t.Errorf("groups %+v with every alert off", groups)
	}
	renderFails(t, withKey(t, "metrics.prometheusRule.alerts.TunaTunnelDown.for=5 minutes"), "/metrics/prometheusRule/alerts/TunaTunnelDown/for")
	renderFails(t, withKey(t, "metrics.prometheusRule.alerts.TunaTunnelDwn.for=5m"), "TunaTunnelDwn")
	renderFails(t, withKey(t, `metrics.prometheusRule.selector={job="x"}`), "/metrics/prometheusRule/selector")
	// The edge's rules ship with the edge: values that still tune them fail
	// with where the rules are now.
	renderFails(t, withKey(t, `metrics.prometheusRule.edgeSelector=job="edge"`), "edge/deploy/monitoring/tuna-edge-rules.yaml")
	renderFails(t, withKey(t, "metrics.prometheusRule.alerts.TunaEdgeLimitRefusals.for=5m"), "edge/deploy/monitoring/tuna-edge-rules.yaml")
}
