package docs

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
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
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			for _, im := range f.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				pkg, ok := strings.CutPrefix(p, module)
				assert.False(t, ok && isRunner(pkg), "%s imports %s: a shared package imports none of %v", rel, pkg, runners)
			}
			return nil
		})
		require.NoError(t, err)
	}
	require.Greater(t, shared, 5, "too few shared packages found: the walk looked in the wrong place")
}
