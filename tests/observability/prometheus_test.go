package observability

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"sigs.k8s.io/yaml"

	"code.tuna.am/tuna/k8s-operator/chart"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// Intervals of the test Prometheus. Grafana's $__rate_interval is at
// least four scrape intervals; the dashboards' queries are evaluated with
// rateInterval in its place.
const (
	scrapeInterval = time.Second
	rateInterval   = "10s"
	// alertFor replaces every alert's for: in the rendered rules (chart
	// value metrics.prometheusRule.alerts.<name>.for). Nothing else of the
	// rule text changes: TestRulesLoadUnchanged checks it.
	alertFor = "1s"
)

// chartFullname is the fullname of the release the rules are rendered
// for (the chart's default release name).
const chartFullname = "tuna-operator-tuna-k8s-operator"

// prometheus is the running server and a small client of its HTTP API.
type prometheus struct {
	*process
	url string
	// rules is the rule file it loaded (the chart's rendered groups and
	// the edge's).
	rules []byte
}

// startPrometheus writes the scrape configuration and the chart's rules
// into dir and starts the server. targets maps controller, agent and edge
// to their host:port. The operator's targets get the labels a
// ServiceMonitor of the chart gives them (job = metrics Service, namespace
// = release namespace, component), which the dashboards and rules select
// by.
func startPrometheus(bin, dir string, targets map[string]string, edgeCA string) (*prometheus, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	rules, err := renderRules(alertFor)
	if err != nil {
		return nil, err
	}
	rulesFile := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rulesFile, rules, 0o644); err != nil {
		return nil, err
	}
	job := func(component string) map[string]any {
		return map[string]any{
			"job_name": chartFullname + "-" + component + "-metrics",
			"static_configs": []any{map[string]any{
				"targets": []string{targets[component]},
				"labels": map[string]string{"namespace": harness.OperatorNamespace, "component": component,
					"service": chartFullname + "-" + component + "-metrics"},
			}},
		}
	}
	cfg := map[string]any{
		"global": map[string]any{
			"scrape_interval": scrapeInterval.String(), "scrape_timeout": scrapeInterval.String(),
			"evaluation_interval": scrapeInterval.String(),
		},
		"rule_files": []string{rulesFile},
		"scrape_configs": []any{job("controller"), job("agent"), map[string]any{
			"job_name": "tuna-edge", "scheme": "https",
			"tls_config":     map[string]any{"ca_file": edgeCA},
			"static_configs": []any{map[string]any{"targets": []string{targets["edge"]}}},
		}},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, b, 0o644); err != nil {
		return nil, err
	}
	listen, err := ports.TakeAddr()
	if err != nil {
		return nil, err
	}
	proc, err := startProcess("prometheus", bin, nil, "--config.file="+cfgFile,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+listen)
	if err != nil {
		return nil, err
	}
	p := &prometheus{process: proc, url: "http://" + listen, rules: rules}
	// Ready, then scraping every target: the scrape manager takes its
	// first targets some seconds after start, and a test's first calls
	// must not fall before the first scrape.
	deadline := time.Now().Add(time.Minute)
	for !p.scrapingAll(len(targets)) {
		if proc.exited() || time.Now().After(deadline) {
			proc.stop()
			return nil, fmt.Errorf("prometheus did not start scraping %v (rules or configuration refused?):\n%s", targets, proc.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return p, nil
}

// scrapingAll reports whether Prometheus is ready and has scraped n
// targets successfully.
func (p *prometheus) scrapingAll(n int) bool {
	resp, err := http.Get(p.url + "/-/ready")
	if err != nil {
		return false
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	targets, err := p.targets()
	if err != nil || len(targets) != n {
		return false
	}
	for _, t := range targets {
		if t.Health != "up" {
			return false
		}
	}
	return true
}

// renderRules renders the chart's PrometheusRule for the test's release
// with every alert's for: set to forDuration ("" keeps values.yaml's), and
// returns its groups, followed by those of the edge's rule file
// (edge/deploy/monitoring/, for: likewise), as one Prometheus rule file.
func renderRules(forDuration string) ([]byte, error) {
	ch, err := chart.Load()
	if err != nil {
		return nil, err
	}
	defaults, _ := ch.Values["metrics"].(map[string]any)["prometheusRule"].(map[string]any)["alerts"].(map[string]any)
	if len(defaults) == 0 {
		return nil, errors.New("values.yaml has no metrics.prometheusRule.alerts")
	}
	alerts := map[string]any{}
	for name := range defaults {
		if forDuration != "" {
			alerts[name] = map[string]any{"for": forDuration}
		}
	}
	values := map[string]any{
		"credentials": map[string]any{"apiKey": "tuna_rendered_forrules"},
		"edge":        map[string]any{"apiURL": "https://edge.example.com"},
		"metrics":     map[string]any{"prometheusRule": map[string]any{"enabled": true, "alerts": alerts}},
	}
	r, err := chart.Render(values, chart.Options{Namespace: harness.OperatorNamespace})
	if err != nil {
		return nil, fmt.Errorf("rendering the chart's PrometheusRule: %w", err)
	}
	m := r.Find("PrometheusRule", chartFullname)
	if m == nil {
		return nil, fmt.Errorf("the chart rendered no PrometheusRule %s", chartFullname)
	}
	spec, _ := m.Object.Object["spec"].(map[string]any)
	groups, _ := spec["groups"].([]any)
	b, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "edge", "deploy", "monitoring", "tuna-edge-rules.yaml"))
	if err != nil {
		return nil, err
	}
	var edge struct {
		Groups []map[string]any `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(b, &edge); err != nil {
		return nil, fmt.Errorf("the edge's rule file: %w", err)
	}
	for _, g := range edge.Groups {
		rules, _ := g["rules"].([]any)
		for _, r := range rules {
			if rule, ok := r.(map[string]any); ok && forDuration != "" {
				rule["for"] = forDuration
			}
		}
		groups = append(groups, g)
	}
	return yaml.Marshal(map[string]any{"groups": groups})
}

// get calls the HTTP API and decodes its data into out.
func (p *prometheus) get(path string, params url.Values, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+path+"?"+params.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var r struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("GET %s: %s: %w", path, body, err)
	}
	if r.Status != "success" {
		return fmt.Errorf("GET %s %v: %s: %s", path, params, r.ErrorType, r.Error)
	}
	return json.Unmarshal(r.Data, out)
}

// series is one series of a range query; Values are [unix time, "value"].
type series struct {
	Metric map[string]string `json:"metric"`
	Values [][2]any          `json:"values"`
}

// finite reports whether the series has a sample that is a number (not
// NaN, which histogram_quantile gives without observations).
func (s series) finite() bool {
	for _, v := range s.Values {
		if str, _ := v[1].(string); str != "NaN" && str != "" {
			return true
		}
	}
	return false
}

func (p *prometheus) queryRange(expr string, start, end time.Time, step time.Duration) ([]series, error) {
	var data struct {
		ResultType string   `json:"resultType"`
		Result     []series `json:"result"`
	}
	err := p.get("/api/v1/query_range", url.Values{"query": {expr}, "start": {unix(start)}, "end": {unix(end)},
		"step": {step.String()}}, &data)
	return data.Result, err
}

// value is the sum of an instant query's samples now (0 without any).
func (p *prometheus) value(expr string) (float64, error) {
	var data struct {
		Result []struct {
			Value [2]any `json:"value"`
		} `json:"result"`
	}
	if err := p.get("/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return 0, err
	}
	var sum float64
	for _, r := range data.Result {
		var v float64
		if _, err := fmt.Sscan(fmt.Sprint(r.Value[1]), &v); err != nil {
			return 0, fmt.Errorf("%s: sample %v: %w", expr, r.Value[1], err)
		}
		sum += v
	}
	return sum, nil
}

// waitAbove waits until expr, as Prometheus sees it, exceeds floor.
func (p *prometheus) waitAbove(t *testing.T, expr string, floor float64) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		v, err := p.value(expr)
		require.NoError(c, err)
		assert.Greater(c, v, floor, expr)
	}, wait, 250*time.Millisecond)
}

func unix(t time.Time) string { return fmt.Sprintf("%.3f", float64(t.UnixMilli())/1000) }

func (p *prometheus) labelValues(label, match string) ([]string, error) {
	var vals []string
	err := p.get("/api/v1/label/"+label+"/values", url.Values{"match[]": {match}}, &vals)
	return vals, err
}

// alert is one alert of /api/v1/alerts.
type alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	ActiveAt    time.Time         `json:"activeAt"`
	Value       string            `json:"value"`
}

func (p *prometheus) alerts() ([]alert, error) {
	var data struct {
		Alerts []alert `json:"alerts"`
	}
	err := p.get("/api/v1/alerts", nil, &data)
	return data.Alerts, err
}

// loadedRule is one rule of /api/v1/rules.
type loadedRule struct {
	Name      string `json:"name"`
	Query     string `json:"query"`
	Duration  int    `json:"duration"`
	Health    string `json:"health"`
	LastError string `json:"lastError"`
	Type      string `json:"type"`
}

type loadedGroup struct {
	Name  string       `json:"name"`
	File  string       `json:"file"`
	Rules []loadedRule `json:"rules"`
}

func (p *prometheus) ruleGroups() ([]loadedGroup, error) {
	var data struct {
		Groups []loadedGroup `json:"groups"`
	}
	err := p.get("/api/v1/rules", nil, &data)
	return data.Groups, err
}

type target struct {
	Labels    map[string]string `json:"labels"`
	Health    string            `json:"health"`
	LastError string            `json:"lastError"`
}

func (p *prometheus) targets() ([]target, error) {
	var data struct {
		ActiveTargets []target `json:"activeTargets"`
	}
	err := p.get("/api/v1/targets", url.Values{"state": {"active"}}, &data)
	return data.ActiveTargets, err
}

// logBuffer keeps the last 256 KiB a process wrote.
type logBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const logKeep = 256 << 10

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > logKeep {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-logKeep:]...)
	}
	return len(p), nil
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

func writeCertPEM(path string, der []byte) error {
	var buf bytes.Buffer
	if err := pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: der}); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// labelsString is a stable rendering of labels for messages.
func labelsString(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+l[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
