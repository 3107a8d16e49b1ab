package v1alpha1

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// apiImport is the import path of this package, as tests elsewhere import it.
const apiImport = "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"

// Every condition reason this package declares is named by at least one
// test of the repository, so a reason no test ever expects cannot hide in
// conditions.go (and in users' alerts) while nothing produces it.
//
// How: conditions.go is parsed for its Reason* constants; every *_test.go
// file of the module is parsed, and a reason counts as tested when Go code
// of a test (not a comment, not a string) refers to it, as
// <alias>.ReasonX where <alias> imports this package, or as ReasonX inside
// this package. The check is static: it sees that a test names the reason
// (the tests compare it with what the operator wrote, in waitReady,
// waitCondition, event counts or unit assertions), not that the run
// produced it; that the naming is an assertion is what review checks.
// Mirrors spelled as literals elsewhere (session.classify,
// upstream.Reason*) count only through a test that compares them with the
// constant. This file itself does not count.
func TestEveryReasonIsAsserted(t *testing.T) {
	declared := declaredReasons(t)
	if len(declared) < 20 {
		t.Fatalf("found only %d Reason constants in conditions.go: the parser misses them", len(declared))
	}
	used := map[string][]string{}
	root := filepath.Join("..", "..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "bin") {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module (tests/tools)
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") || filepath.Base(path) == "reasons_test.go" && filepath.Dir(path) == "." {
			return nil
		}
		for _, r := range reasonsNamedIn(t, path) {
			used[r] = append(used[r], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range declared {
		if len(used[r]) == 0 {
			t.Errorf("%s is declared in conditions.go but no test names it: add a test that expects it (or remove the reason)", r)
		}
	}
}

// declaredReasons are the names of the Reason* constants of conditions.go.
func declaredReasons(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "conditions.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			for _, n := range spec.(*ast.ValueSpec).Names {
				if strings.HasPrefix(n.Name, "Reason") {
					out = append(out, n.Name)
				}
			}
		}
	}
	return out
}

// reasonsNamedIn are the Reason* identifiers of this package that the Go
// code of one test file refers to.
func reasonsNamedIn(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var aliases []string
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == apiImport {
			alias := "v1alpha1"
			if imp.Name != nil {
				alias = imp.Name.Name
			}
			aliases = append(aliases, alias)
		}
	}
	inPackage := f.Name.Name == "v1alpha1" && filepath.Clean(filepath.Dir(path)) == "."
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok && slices.Contains(aliases, id.Name) && strings.HasPrefix(x.Sel.Name, "Reason") {
				out = append(out, x.Sel.Name)
			}
			return false
		case *ast.Ident:
			if inPackage && strings.HasPrefix(x.Name, "Reason") {
				out = append(out, x.Name)
			}
		}
		return true
	})
	return out
}
