package docs

import (
	"path/filepath"
	"slices"
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
	"tests/rawhttp", "tests/stats", "tests/testca", "tests/testedge",
}

// The product's packages import nothing of tests/, and their tests only
// the test libraries; each library is a library: it has code beside its
// tests (a package of tests only is a suite).
func TestProductTestsImportOnlyTestLibraries(t *testing.T) {
	root := harness.RepoRoot()
	seen := 0
	for _, top := range []string{"operator", "edge", "cli", "internal", "chart", "hack"} {
		eachImport(t, root, top, func(rel, pkg string) {
			if !strings.HasPrefix(pkg, "tests/") {
				return
			}
			seen++
			if !strings.HasSuffix(rel, "_test.go") {
				assert.Fail(t, "product code imports tests/", "%s imports %s: only tests may", rel, pkg)
				return
			}
			assert.Contains(t, testLibraries, pkg, "%s imports %s, which is not one of the test libraries %v: move what it needs into one of them (a suite's helpers into tests/harness)", rel, pkg, testLibraries)
		})
	}
	require.NotZero(t, seen, "no import of tests/ found: the walk looked in the wrong place")

	for _, lib := range testLibraries {
		files, err := filepath.Glob(filepath.Join(root, lib, "*.go"))
		require.NoError(t, err)
		assert.True(t, slices.ContainsFunc(files, func(f string) bool { return !strings.HasSuffix(f, "_test.go") }), "%s has no code beside its tests: it is a suite, not a library", lib)
	}
}
