package observability

import (
	"context"
	"encoding/json"
	"io/fs"
	"net"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"code.tuna.am/tuna/k8s-operator/chart"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// Tests run in this file's order; the edge outage comes last, since it
// disturbs every component.

// ruleFile is a Prometheus rule file.
type ruleFile struct {
	Groups []struct {
		Name  string           `json:"name"`
		Rules []map[string]any `json:"rules"`
	} `json:"groups"`
}

// The rules Prometheus runs are the chart's, rendered, with only each
// alert's for: shortened through its chart value: blank the for: of both
// renderings and they are the same.
func TestRulesLoadUnchanged(t *testing.T) {
	shipped, err := renderRules("")
	require.NoError(t, err)
	var a, b ruleFile
	require.NoError(t, yaml.UnmarshalStrict(shipped, &a))
	require.NoError(t, yaml.UnmarshalStrict(env.prom.rules, &b))
	for _, g := range b.Groups {
		for _, r := range g.Rules {
			assert.Equal(t, alertFor, r["for"], "%s in the test's rules", r["alert"])
		}
	}
	for _, g := range a.Groups {
		for _, r := range g.Rules {
			assert.NotEqual(t, alertFor, r["for"], "%s ships with the test's for:", r["alert"])
		}
	}
	for _, f := range []*ruleFile{&a, &b} {
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				delete(r, "for")
			}
		}
	}
	assert.Equal(t, a, b, "the test's rules differ from the chart's in more than for:")
}

// Prometheus' own rule loader takes every rule of the chart: each rule of
// the rendered PrometheusRule is loaded and evaluates without error.
func TestRulesLoad(t *testing.T) {
	var want []string
	var file ruleFile
	require.NoError(t, yaml.UnmarshalStrict(env.prom.rules, &file))
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			want = append(want, g.Name+"/"+r["alert"].(string))
		}
	}
	require.Len(t, want, 5)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		groups, err := env.prom.ruleGroups()
		require.NoError(c, err)
		var got []string
		for _, g := range groups {
			for _, r := range g.Rules {
				got = append(got, g.Name+"/"+r.Name)
				assert.Equal(c, "alerting", r.Type, r.Name)
				assert.Equal(c, "ok", r.Health, "%s: %s", r.Name, r.LastError)
			}
		}
		assert.ElementsMatch(c, want, got)
	}, wait, 200*time.Millisecond)
}

// The loader is strict: a rule file with one broken expression stops
// Prometheus at start with an error that names it, so TestRulesLoad's
// server could not have started on bad rules.
func TestRuleLoaderRefusesBadRules(t *testing.T) {
	var file ruleFile
	require.NoError(t, yaml.UnmarshalStrict(env.prom.rules, &file))
	require.Equal(t, "TunaTunnelDown", file.Groups[0].Rules[0]["alert"])
	file.Groups[0].Rules[0]["expr"] = file.Groups[0].Rules[0]["expr"].(string) + " ==="
	broken, err := yaml.Marshal(file)
	require.NoError(t, err)
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	require.NoError(t, os.WriteFile(rules, broken, 0o644))
	cfg := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(cfg, []byte("rule_files: ["+rules+"]\n"), 0o644))
	p, err := startProcess("prometheus-bad-rules", env.prom.cmd.Path, nil, "--config.file="+cfg,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+ports.Addr(t))
	require.NoError(t, err)
	select {
	case <-p.done:
	case <-time.After(wait):
		p.stop()
		t.Fatal("prometheus started on a broken rule")
	}
	assert.NotZero(t, p.cmd.ProcessState.ExitCode())
	assert.Contains(t, p.out.String(), "TunaTunnelDown")
	assert.Contains(t, p.out.String(), "parse error")
}

// dashboardQuery is one target of a shipped dashboard.
type dashboardQuery struct{ dashboard, panel, expr string }

// shippedDashboards reads every dashboard of the chart, as it ships
// (chart.Files, the embedded chart), and returns its queries and its
// query variables (name -> label_values(metric, label)).
func shippedDashboards(t *testing.T) (queries []dashboardQuery, variables map[string]map[string][2]string) {
	t.Helper()
	files, err := fs.Glob(chart.Files(), "dashboards/*.json")
	require.NoError(t, err)
	require.Len(t, files, 2)
	variables = map[string]map[string][2]string{}
	labelValues := regexp.MustCompile(`^label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)$`)
	for _, f := range files {
		b, err := fs.ReadFile(chart.Files(), f)
		require.NoError(t, err)
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
				assert.Contains(t, found, strings.TrimPrefix(env.edge.APIURL(), "https://"))
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

// firing waits until the alert name fires with labels that include want,
// and returns it.
func firing(t *testing.T, name string, want map[string]string) alert {
	t.Helper()
	var got alert
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		alerts, err := env.prom.alerts()
		require.NoError(c, err)
		var seen []string
		for _, a := range alerts {
			if a.Labels["alertname"] != name {
				continue
			}
			seen = append(seen, a.State+labelsString(a.Labels))
			if a.State == "firing" && hasLabels(a.Labels, want) {
				got = a
				return
			}
		}
		c.Errorf("%s%s is not firing; %s alerts: %v", name, labelsString(want), name, seen)
	}, 2*wait, 250*time.Millisecond)
	return got
}

// active reports whether the alert name is pending or firing with want.
func active(t *testing.T, name string, want map[string]string) bool {
	t.Helper()
	alerts, err := env.prom.alerts()
	require.NoError(t, err)
	return slices.ContainsFunc(alerts, func(a alert) bool { return a.Labels["alertname"] == name && hasLabels(a.Labels, want) })
}

// resolved waits until the alert name is neither pending nor firing with want.
func resolved(t *testing.T, name string, want map[string]string) {
	t.Helper()
	require.Eventually(t, func() bool { return !active(t, name, want) }, 2*wait, 250*time.Millisecond,
		"%s%s stays active", name, labelsString(want))
}

func hasLabels(l, want map[string]string) bool {
	for k, v := range want {
		if l[k] != v {
			return false
		}
	}
	return true
}

// A tcp Tunnel whose alias no TCPEndpoint reserved gets its key, but the
// edge refuses its bind: the agent keeps retrying without a session, and
// TunaTunnelDown fires for that Tunnel, named in its summary. Reserving the
// endpoint brings the Tunnel up and the alert resolves.
func TestAlertTunnelDown(t *testing.T) {
	ns := namespace(t, "down")
	tok := strings.SplitN(ns, "-", 3)[1]
	greeterService(t, ns, "pg", 5432)
	want := map[string]string{"exported_namespace": ns, "name": "pg", "severity": "warning"}
	require.False(t, active(t, "TunaTunnelDown", want))
	tun := tcpTunnel(ns, "pg", "obs-late-"+tok, "tcp://pg:5432")
	create(t, tun)
	t.Cleanup(func() { deleteAndWait(t, tun) })
	waitReady(t, key(ns, "pg"), metav1.ConditionFalse, tunav1.ReasonEndpointNotReady)

	a := firing(t, "TunaTunnelDown", want)
	assert.Equal(t, "Tunnel "+ns+"/pg has no edge session", a.Annotations["summary"])
	assert.Contains(t, a.Annotations["runbook_url"], "operations.md#tunatunneldown")

	ep := &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pg"}, Spec: tunav1.TCPEndpointSpec{Alias: "obs-late-" + tok}}
	create(t, ep)
	t.Cleanup(func() { deleteAndWait(t, ep) })
	waitReady(t, key(ns, "pg"), metav1.ConditionTrue, tunav1.ReasonConnected)
	resolved(t, "TunaTunnelDown", want)
}

// A Tunnel asking for a subdomain another namespace reserved gets no key
// (KeyIssued=False, AddressOwned): TunaTunnelKeysNotIssued fires, and
// resolves once that Tunnel is gone.
func TestAlertTunnelKeysNotIssued(t *testing.T) {
	owner, other := namespace(t, "owner"), namespace(t, "other")
	sub := "obs-owned-" + strings.SplitN(owner, "-", 3)[1]
	d := &tunav1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: owner, Name: "shop"}, Spec: tunav1.DomainSpec{Subdomain: sub}}
	create(t, d)
	t.Cleanup(func() { deleteAndWait(t, d) })
	waitObjectReady(t, d, func() []metav1.Condition { return d.Status.Conditions })
	// No other test leaves a refused key behind.
	resolved(t, "TunaTunnelKeysNotIssued", nil)

	echoService(t, other, "shop", 8080)
	tun := httpTunnel(other, "shop", sub, "http://shop:8080")
	create(t, tun)
	waitReady(t, key(other, "shop"), metav1.ConditionFalse, tunav1.ReasonAddressOwned)
	a := firing(t, "TunaTunnelKeysNotIssued", map[string]string{"severity": "warning"})
	assert.Equal(t, "1 Tunnels have no key: the edge refused it", a.Annotations["summary"])

	deleteAndWait(t, tun)
	resolved(t, "TunaTunnelKeysNotIssued", nil)
}

// More SSH connections than the edge lets log in at once: the edge refuses
// the one over its handshake limit, and TunaEdgeLimitRefusals fires for
// that limit on that instance.
func TestAlertEdgeLimitRefusals(t *testing.T) {
	instance := strings.TrimPrefix(env.edge.APIURL(), "https://")
	refusals := `tuna_edge_limit_refusals_total{limit="handshakes"}`
	before, err := env.prom.value(refusals)
	require.NoError(t, err)
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	// Connections that never start the SSH handshake each hold a slot
	// until the edge's handshake timeout; the default limit is 64.
	for range 64 + 1 {
		c, err := net.DialTimeout("tcp", env.edge.SSHAddr(), 5*time.Second)
		require.NoError(t, err)
		conns = append(conns, c)
	}
	refused := func() bool {
		// The refused connection gets one line, then EOF.
		c := conns[len(conns)-1]
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b := make([]byte, 512)
		n, _ := c.Read(b)
		return strings.Contains(string(b[:n]), "too many SSH logins")
	}
	require.True(t, refused(), "the edge refused the connection over its handshake limit")
	// Prometheus sees this refusal, whatever an earlier run left firing.
	env.prom.waitAbove(t, refusals, before)
	for _, c := range conns {
		c.Close()
	}
	conns = nil

	a := firing(t, "TunaEdgeLimitRefusals", map[string]string{"instance": instance, "limit": "handshakes"})
	assert.Equal(t, "The edge "+instance+" refuses work at its handshakes limit", a.Annotations["summary"])
}

// The edge goes away. The controller's API calls fail (TunaEdgeAPIFailing),
// the key of a Tunnel created meanwhile cannot be issued, so its
// reconciles fail and retry (TunaReconcileErrors for tunnel-key), and
// running tunnels lose their sessions (TunaTunnelDown). With the edge back
// the tunnel reconnects and its alert resolves.
func TestAlertsOnEdgeOutage(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "outage")
	tok := strings.SplitN(ns, "-", 3)[1]
	echoService(t, ns, "web", 8080)
	running := httpTunnel(ns, "web", "obs-outage-"+tok, "http://web:8080")
	create(t, running)
	t.Cleanup(func() { deleteAndWait(t, running) })
	waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	down := map[string]string{"exported_namespace": ns, "name": "web"}
	require.False(t, active(t, "TunaTunnelDown", down))

	failedCalls := `tuna_edge_api_calls_total{result="error"}`
	before, err := env.prom.value(failedCalls)
	require.NoError(t, err)
	opts := env.edge.Options
	require.NoError(t, env.edge.Close())
	restarted := false
	restart := func() {
		if restarted {
			return
		}
		restarted = true
		edge, err := harness.StartEdge(ctx, env.edgeDir, opts)
		require.NoError(t, err)
		env.edge = edge
	}
	late := httpTunnel(ns, "late", "obs-late-"+tok, "http://web:8080")
	create(t, late)
	t.Cleanup(func() { deleteAndWait(t, late) })
	// Cleanups run last first: the edge is back before the Tunnels'
	// finalizers need it.
	t.Cleanup(restart)

	// Calls without an answer, as Prometheus sees them: the alert below is
	// this outage's, whatever an earlier run left firing.
	env.prom.waitAbove(t, failedCalls, before)
	a := firing(t, "TunaEdgeAPIFailing", map[string]string{"severity": "critical"})
	assert.Contains(t, a.Annotations["description"], "of the controller's calls to the edge control API failed")
	firing(t, "TunaReconcileErrors", map[string]string{"controller": "tunnel-key"})
	firing(t, "TunaTunnelDown", down)

	restart()
	waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	waitReady(t, key(ns, "late"), metav1.ConditionTrue, tunav1.ReasonConnected)
	resolved(t, "TunaTunnelDown", down)
}
