package docs

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// packages are the repository's Go packages, its separate modules'
// included: every folder with .go files, outside testdata and dot folders.
func packages(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".go") {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			if !slices.Contains(out, rel) {
				out = append(out, rel)
			}
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// tableNames are the backticked names in the first column of the table
// under heading in the Markdown file.
func tableNames(t *testing.T, file, heading string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	text := string(data)
	i := strings.Index(text, "\n"+heading+"\n")
	require.GreaterOrEqual(t, i, 0, "%s has no %q", file, heading)
	text = text[i+len(heading)+2:]
	if j := strings.Index(text, "\n#"); j >= 0 {
		text = text[:j]
	}
	var names []string
	code := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(text, "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "|") || len(cells) < 3 {
			continue
		}
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			names = append(names, m[1])
		}
	}
	return names
}

// The architecture's package table names every package, and only
// packages (or the folders of the separate tool modules); every package
// says what it is in a doc comment; the README's layout names every
// top-level folder.
func TestEveryPackageIsNamed(t *testing.T) {
	root := harness.RepoRoot()
	pkgs := packages(t, root)
	named := tableNames(t, filepath.Join(root, "docs", "architecture.md"), "## Package ownership")
	for _, p := range pkgs {
		assert.Contains(t, named, p, "docs/architecture.md's package table does not name the package %s: add a row (or name it in a row's first column)", p)
		assert.True(t, hasDocComment(t, filepath.Join(root, p)), "the package %s has no doc comment (// Package %s ... before its package clause)", p, filepath.Base(p))
	}
	for _, n := range named {
		_, err := os.Stat(filepath.Join(root, n, "go.mod"))
		assert.True(t, slices.Contains(pkgs, n) || err == nil, "docs/architecture.md's package table names %s, which is no package or module", n)
	}

	layout := tableNames(t, filepath.Join(root, "README.md"), "## Layout")
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			assert.Contains(t, layout, e.Name()+"/", "README.md's layout does not name the folder %s/", e.Name())
		}
	}
	for _, n := range layout {
		_, err := os.Stat(filepath.Join(root, n))
		assert.NoError(t, err, "README.md's layout names %s, which does not exist", n)
	}
}

// hasDocComment reports whether a file of the package in dir has a doc
// comment on its package clause (any file of a package of tests only).
func hasDocComment(t *testing.T, dir string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	onlyTests := !slices.ContainsFunc(files, func(f string) bool { return !strings.HasSuffix(f, "_test.go") })
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") && !onlyTests {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly|parser.ParseComments)
		require.NoError(t, err)
		if af.Doc != nil && strings.TrimSpace(af.Doc.Text()) != "" {
			return true
		}
	}
	return false
}
