// Package release holds the checks that keep the release workflow, the
// chart and the install instructions in step (the scripts beside it are
// the workflow's steps; notes/ is the release-notes extractor).
package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var root = filepath.Join("..", "..")

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// workflow is the part of release.yml these checks read.
type workflow struct {
	Env  map[string]string `json:"env"`
	Jobs map[string]struct {
		Steps []struct {
			Uses string            `json:"uses"`
			Run  string            `json:"run"`
			With map[string]string `json:"with"`
		} `json:"steps"`
	} `json:"jobs"`
}

func releaseWorkflow(t *testing.T) (workflow, string) {
	t.Helper()
	text := read(t, ".github/workflows/release.yml")
	var w workflow
	if err := yaml.Unmarshal([]byte(text), &w); err != nil {
		t.Fatalf("release.yml: %v", err)
	}
	return w, text
}

// TestPublishedWhereInstalled: the chart's default image and the install
// lines name the registry the release workflow pushes to.
func TestPublishedWhereInstalled(t *testing.T) {
	w, _ := releaseWorkflow(t)
	registry := w.Env["REGISTRY"]
	if registry == "" || strings.Contains(registry, "://") || strings.HasSuffix(registry, "/") {
		t.Fatalf("release.yml env.REGISTRY = %q, want host/path such as code.tuna.am/tuna", registry)
	}
	var values struct {
		Image struct {
			Repository string `json:"repository"`
		} `json:"image"`
	}
	if err := yaml.Unmarshal([]byte(read(t, "chart/tuna-k8s-operator/values.yaml")), &values); err != nil {
		t.Fatal(err)
	}
	if want := registry + "/tuna-k8s-operator"; values.Image.Repository != want {
		t.Errorf("chart values image.repository = %q, but the release pushes the operator's image to %s", values.Image.Repository, want)
	}
	chartRef := "oci://" + registry + "/charts/tuna-k8s-operator"
	for _, doc := range []string{"README.md", "chart/tuna-k8s-operator/README.md", "docs/releasing.md"} {
		text := read(t, doc)
		if !strings.Contains(text, chartRef) {
			t.Errorf("%s does not install the published chart %s", doc, chartRef)
		}
		if strings.Contains(text, "helm repo add") || strings.Contains(text, "nelm repo add") {
			t.Errorf("%s adds a Helm repository, but the chart is published only as an OCI artifact", doc)
		}
	}
}

// TestReleaseSteps: the workflow tests first, builds every image for both
// architectures with the version stamps, pushes the chart, and releases
// the binaries, the CRDs and the notes.
func TestReleaseSteps(t *testing.T) {
	w, text := releaseWorkflow(t)
	if !strings.Contains(text, `tags: ["v*"]`) {
		t.Error("release.yml does not run on tags v*")
	}
	var runs []string
	for _, j := range w.Jobs {
		for _, s := range j.Steps {
			runs = append(runs, s.Run)
		}
	}
	all := strings.Join(runs, "\n")
	for _, want := range []string{
		"bash .ci/run",
		"go run ./hack/images/cmd/tuna-images push",
		`--registry "$REGISTRY"`, `--tag "$VERSION"`, "--platforms linux/amd64,linux/arm64",
		`--version "$GITHUB_REF_NAME"`, `--commit "$COMMIT"`, `--date "$DATE"`,
		`helm package chart/tuna-k8s-operator --version "$VERSION" --app-version "$VERSION"`,
		`helm push "release/tuna-k8s-operator-$VERSION.tgz" "oci://$REGISTRY/charts"`,
		"bash hack/release/build.sh",
		`go run ./hack/release/notes "$GITHUB_REF_NAME" > notes.md`,
		"--notes-file notes.md",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no step of release.yml runs %q", want)
		}
	}
	df := read(t, "Dockerfile")
	for _, image := range []string{"tuna-k8s-operator", "tuna-edge", "tuna-operator"} {
		if !strings.Contains(df, "AS "+image+"\n") {
			t.Errorf("the Dockerfile has no target %s for the release's image", image)
		}
	}
	for _, arg := range []string{"ARG VERSION", "ARG COMMIT", "ARG DATE"} {
		if !strings.Contains(df, arg) {
			t.Errorf("the Dockerfile lacks %s", arg)
		}
	}
	if got := read(t, ".ci/run"); !strings.Contains(got, "go tool task lint\n") || !strings.Contains(got, "go tool task test\n") {
		t.Errorf(".ci/run does not lint and test:\n%s", got)
	}
}
