package observability

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"code.tuna.am/tuna/k8s-operator/chart"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// dashboardQuery is one target of a shipped dashboard.
type dashboardQuery struct{ dashboard, panel, expr string }

// shippedDashboards reads every dashboard as it ships: the chart's (the
// embedded chart's files) and the edge's (edge/deploy/monitoring/), and
// returns their queries and query variables (name -> label_values(metric,
// label)).
func shippedDashboards(t *testing.T) (queries []dashboardQuery, variables map[string]map[string][2]string) {
	t.Helper()
	files, err := fs.Glob(chart.Files(), "dashboards/*.json")
	require.NoError(t, err)
	require.Len(t, files, 1)
	contents := map[string][]byte{}
	for _, f := range files {
		b, err := fs.ReadFile(chart.Files(), f)
		require.NoError(t, err)
		contents[f] = b
	}
	edge, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "edge", "deploy", "monitoring", "tuna-edge.json"))
	require.NoError(t, err)
	contents["tuna-edge.json"] = edge
	variables = map[string]map[string][2]string{}
	labelValues := regexp.MustCompile(`^label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)$`)
	for f, b := range contents {
		var d struct {
			Panels []struct {
				Type    string `json:"type"`
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
			Templating struct {
				List []struct {
					Type       string `json:"type"`
					Name       string `json:"name"`
					Definition string `json:"definition"`
				} `json:"list"`
			} `json:"templating"`
		}
		require.NoError(t, json.Unmarshal(b, &d))
		name := filepath.Base(f)
		variables[name] = map[string][2]string{}
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			m := labelValues.FindStringSubmatch(v.Definition)
			require.NotNil(t, m, "%s: variable %s: %q is not label_values(metric, label)", name, v.Name, v.Definition)
			variables[name][v.Name] = [2]string{m[1], m[2]}
		}
		for _, p := range d.Panels {
			if p.Type == "row" {
				continue
			}
			require.NotEmpty(t, p.Targets, "%s: panel %q has no query", name, p.Title)
			for _, tg := range p.Targets {
				require.NotEmpty(t, tg.Expr, "%s: panel %q", name, p.Title)
				queries = append(queries, dashboardQuery{name, p.Title, tg.Expr})
			}
		}
	}
	return queries, variables
}

// Every query of every panel of both dashboards, evaluated by Prometheus
// over real series scraped from the controller, the agent and the edge
// while traffic flows, draws something: at least one series with a number.
// Variables are resolved as Grafana would: their label_values query, then
// All as the list of values found ($__rate_interval is rateInterval).
func TestDashboardQueries(t *testing.T) {
	start := time.Now()
	fx := startFixture(t)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		targets, err := env.prom.targets()
		require.NoError(c, err)
		require.Len(c, targets, 3, "controller, agent and edge")
		for _, tg := range targets {
			assert.Equal(c, "up", tg.Health, "%s: %s", labelsString(tg.Labels), tg.LastError)
		}
		assert.GreaterOrEqual(c, fx.ok.Load(), int64(20), "rounds of traffic that passed")
	}, wait, 200*time.Millisecond)

	t.Logf("traffic flows and every target is up after %s", time.Since(start).Round(time.Second))
	queries, variables := shippedDashboards(t)
	require.GreaterOrEqual(t, len(queries), 40)
	// Each variable's values, as its label_values query finds them.
	values := map[string]map[string]string{}
	for dash, vars := range variables {
		values[dash] = map[string]string{}
		for name, v := range vars {
			var found []string
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				var err error
				found, err = env.prom.labelValues(v[1], v[0])
				require.NoError(c, err)
				assert.NotEmpty(c, found, "%s: $%s = label_values(%s, %s) finds nothing", dash, name, v[0], v[1])
			}, wait, 200*time.Millisecond)
			if name == "namespace" {
				assert.Contains(t, found, harness.OperatorNamespace)
			}
			if name == "instance" {
				assert.Contains(t, found, strings.TrimPrefix(env.Edge.APIURL(), "https://"))
			}
			quoted := make([]string, len(found))
			for i, f := range found {
				quoted[i] = strings.ReplaceAll(regexp.QuoteMeta(f), `\`, `\\`)
			}
			values[dash][name] = "(" + strings.Join(quoted, "|") + ")"
		}
	}
	substitute := func(q dashboardQuery) string {
		expr := strings.ReplaceAll(q.expr, "$__rate_interval", rateInterval)
		names := make([]string, 0, len(values[q.dashboard]))
		for n := range values[q.dashboard] {
			names = append(names, n)
		}
		sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
		for _, n := range names {
			expr = strings.ReplaceAll(expr, "$"+n, values[q.dashboard][n])
		}
		return expr
	}

	evaluating := time.Now()
	pending := slices.Clone(queries)
	why := map[dashboardQuery]string{}
	deadline := time.Now().Add(2 * wait)
	for len(pending) > 0 && time.Now().Before(deadline) {
		var next []dashboardQuery
		for _, q := range pending {
			expr := substitute(q)
			require.NotContains(t, expr, "$", "%s %q: a variable is left in %s", q.dashboard, q.panel, expr)
			result, err := env.prom.queryRange(expr, start, time.Now(), 2*time.Second)
			require.NoError(t, err, "%s %q: %s", q.dashboard, q.panel, expr)
			drawn := slices.ContainsFunc(result, series.finite)
			if !drawn {
				why[q] = "no series"
				if len(result) > 0 {
					why[q] = "only NaN"
				}
				next = append(next, q)
			}
		}
		if len(next) > 0 && len(next) != len(pending) {
			t.Logf("after %s still without data: %v", time.Since(evaluating).Round(time.Second), next)
		}
		pending = next
		if len(pending) > 0 {
			time.Sleep(time.Second) // the next scrapes and the rate windows
		}
	}
	for _, q := range pending {
		t.Errorf("%s, panel %q: %s for %s", q.dashboard, q.panel, why[q], substitute(q))
	}
	t.Logf("%d queries of %d panels evaluated in %s; traffic rounds: %d passed, %d failed", len(queries), countPanels(queries), time.Since(evaluating).Round(time.Second), fx.ok.Load(), fx.failed.Load())
}

func countPanels(qs []dashboardQuery) int {
	panels := map[[2]string]bool{}
	for _, q := range qs {
		panels[[2]string{q.dashboard, q.panel}] = true
	}
	return len(panels)
}
