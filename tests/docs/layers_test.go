package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// runners are the operator's packages that run things: the components'
// wiring, the controller's reconcilers and the agent's data plane. Every
// other package under operator/pkg is shared (what the controller, the
// agent and the CLI agree on) and imports none of them, so the CLI links
// no reconciler or relay and a model's change of the agent cannot ripple
// back (docs/architecture.md, "What the CLI links").
var runners = []string{"operator/pkg/app", "operator/pkg/agent", "operator/pkg/controller"}

func isRunner(pkg string) bool {
	for _, r := range runners {
		if pkg == r || strings.HasPrefix(pkg, r+"/") {
			return true
		}
	}
	return false
}

// The shared packages of the operator import nothing of the runners; their
// tests may (a model's test that drives the router it feeds).
func TestSharedPackagesImportNoRunner(t *testing.T) {
	root := harness.RepoRoot()
	shared := 0
	entries, err := os.ReadDir(filepath.Join(root, "operator", "pkg"))
	require.NoError(t, err)
	for _, e := range entries {
		dir := "operator/pkg/" + e.Name()
		if !e.IsDir() || isRunner(dir) {
			continue
		}
		shared++
		eachImport(t, root, dir, func(rel, pkg string) {
			if !strings.HasSuffix(rel, "_test.go") {
				assert.False(t, isRunner(pkg), "%s imports %s: a shared package imports none of %v", rel, pkg, runners)
			}
		})
	}
	require.Greater(t, shared, 5, "too few shared packages found: the walk looked in the wrong place")
}
