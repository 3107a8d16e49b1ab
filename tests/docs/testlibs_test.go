package docs

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// testLibraries are the packages under tests/ that the product's own
// tests may import: libraries of real parts and helpers, none of them a
// suite (a suite's setup, its TestMain, runs in the importer's binary
// and its copies of helpers drift).
var testLibraries = []string{
	"tests/admission", "tests/etcdcluster", "tests/harness", "tests/ports",
	"tests/rawhttp", "tests/stats", "tests/testca",
}

// The product's packages import nothing of tests/, and their tests only
// the test libraries; each library is a library: it has code beside its
// tests (a package of tests only is a suite).
func TestProductTestsImportOnlyTestLibraries(t *testing.T) {
	root := harness.RepoRoot()
	seen := 0
	for _, top := range []string{"operator", "edge", "cli", "internal", "chart", "hack"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
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
				if !ok || !strings.HasPrefix(pkg, "tests/") {
					continue
				}
				seen++
				if !strings.HasSuffix(path, "_test.go") {
					assert.Fail(t, "product code imports tests/", "%s imports %s: only tests may", rel, pkg)
					continue
				}
				assert.Contains(t, testLibraries, pkg, "%s imports %s, which is not one of the test libraries %v: move what it needs into one of them (a suite's helpers into tests/harness)", rel, pkg, testLibraries)
			}
			return nil
		})
		require.NoError(t, err)
	}
	require.NotZero(t, seen, "no import of tests/ found: the walk looked in the wrong place")

	for _, lib := range testLibraries {
		files, err := filepath.Glob(filepath.Join(root, lib, "*.go"))
		require.NoError(t, err)
		assert.True(t, slices.ContainsFunc(files, func(f string) bool { return !strings.HasSuffix(f, "_test.go") }), "%s has no code beside its tests: it is a suite, not a library", lib)
	}
}
