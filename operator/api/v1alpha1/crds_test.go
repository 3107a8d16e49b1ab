package v1alpha1_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The generated files must match the Go types: a change to operator/api
// without hack/generate.sh fails here, naming the file to regenerate.

const fixHint = "run hack/generate.sh and commit the result"

// moduleRoot is the directory of the product's go.mod, above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's directory")
		}
		dir = parent
	}
}

// goCommand is the go command that runs the test: go test puts its
// GOROOT/bin first on the test's PATH.
func goCommand(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to run controller-gen (go tool controller-gen): %v", err)
	}
	return p
}

// controllerGen runs the controller-gen pinned by the tool directive in
// go.mod, from the module root.
func controllerGen(t *testing.T, root string, args ...string) {
	t.Helper()
	cmd := exec.Command(goCommand(t), append([]string{"tool", "controller-gen"}, args...)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go tool controller-gen %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestGeneratedFilesAreUpToDate(t *testing.T) {
	root := moduleRoot(t)
	tmp := t.TempDir()

	// CRDs: crds/ and its copy in the chart.
	genCRDs := filepath.Join(tmp, "crds")
	controllerGen(t, root, "crd:crdVersions=v1", "paths=./operator/api/...", "output:crd:artifacts:config="+genCRDs)
	for _, dir := range []string{"crds", filepath.Join("chart", "tuna-k8s-operator", "crds")} {
		compareDir(t, genCRDs, filepath.Join(root, dir), dir)
	}

	// DeepCopy, one API package at a time (controller-gen writes each
	// package's zz_generated.deepcopy.go under the same name).
	pkgs, err := filepath.Glob(filepath.Join(root, "operator", "api", "*", "doc.go"))
	if err != nil || len(pkgs) == 0 {
		t.Fatalf("no API packages found under operator/api (err %v)", err)
	}
	for _, doc := range pkgs {
		pkgDir := filepath.Dir(doc)
		rel, _ := filepath.Rel(root, pkgDir)
		out := filepath.Join(tmp, "object", filepath.Base(pkgDir))
		controllerGen(t, root, "object", "paths=./"+filepath.ToSlash(rel), "output:object:dir="+out)
		compareFile(t, filepath.Join(out, "zz_generated.deepcopy.go"),
			filepath.Join(pkgDir, "zz_generated.deepcopy.go"), filepath.Join(rel, "zz_generated.deepcopy.go"))
	}
}

// compareDir checks that dir holds exactly the generated k8s.tuna.am_*.yaml
// files of genDir, with the same contents.
func compareDir(t *testing.T, genDir, dir, relDir string) {
	t.Helper()
	want := globNames(t, genDir)
	if len(want) == 0 {
		t.Fatalf("controller-gen wrote no CRDs into %s", genDir)
	}
	got := globNames(t, dir)
	for _, name := range got {
		if _, err := os.Stat(filepath.Join(genDir, name)); err != nil {
			t.Errorf("%s is not generated from the Go types any more (stale): %s", filepath.Join(relDir, name), fixHint)
		}
	}
	for _, name := range want {
		compareFile(t, filepath.Join(genDir, name), filepath.Join(dir, name), filepath.Join(relDir, name))
	}
}

func globNames(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "k8s.tuna.am_*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(paths))
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	sort.Strings(names)
	return names
}

func compareFile(t *testing.T, generated, committed, rel string) {
	t.Helper()
	want, err := os.ReadFile(generated)
	if err != nil {
		t.Fatalf("reading what controller-gen wrote: %v", err)
	}
	got, err := os.ReadFile(committed)
	if os.IsNotExist(err) {
		t.Errorf("%s is missing: %s", rel, fixHint)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the Go types in operator/api (%s): %s", rel, firstDifference(got, want), fixHint)
	}
}

// firstDifference describes the first line where got and want differ.
func firstDifference(got, want []byte) string {
	g := strings.Split(string(got), "\n")
	w := strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if i >= len(g) || i >= len(w) || gl != wl {
			return fmt.Sprintf("line %d is %q, generated %q", i+1, gl, wl)
		}
	}
	return "same lines, different bytes"
}
