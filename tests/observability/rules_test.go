package observability

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

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
