package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// applyExample creates every object of examples/<file> in namespace ns, as
// `kubectl apply -n ns -f examples/<file>` would, after edit changes each
// object (nil: as written). It returns the objects, and deletes those
// still there when the test ends.
func applyExample(t *testing.T, ns, file string, edit func(*unstructured.Unstructured)) []*unstructured.Unstructured {
	t.Helper()
	objs := readManifests(t, filepath.Join(harness.RepoRoot(), "examples", file))
	for _, u := range objs {
		u.SetNamespace(ns)
		if edit != nil {
			edit(u)
		}
		require.NoError(t, env.CP.Client.Create(context.Background(), u), "creating %s %s from examples/%s", u.GetKind(), u.GetName(), file)
		// Examples publish on fixed addresses (my-app, postgres) that
		// later tests take too: a test that fails before deleting them
		// must not fail the next one as well.
		gone := u.DeepCopy()
		t.Cleanup(func() { deleteAndWait(t, gone, client.ObjectKeyFromObject(gone)) })
	}
	require.NotEmpty(t, objs, "examples/%s holds no object", file)
	return objs
}

// readManifests reads the objects of a YAML file (documents without one,
// such as comments only, are left out).
func readManifests(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		require.NoError(t, err)
		u := &unstructured.Unstructured{}
		require.NoError(t, utilyaml.Unmarshal(doc, &u.Object), "%s", path)
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// Every manifest of examples/ and of the chart's examples/ is accepted by
// the real API server, with the CRDs as installed (a server-side dry run
// in a test namespace: nothing runs, and the example's own namespace is
// replaced). The chart's values files are rendered by the chart's own
// tests (chart/values_test.go, TestExamples). Objects of kinds this suite
// has no CRD for (External Secrets Operator's ExternalSecret) must be
// listed in foreign with a check of their own. The running examples are
// applied for real by the tests that use applyExample.
func TestEveryExampleIsAccepted(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	root := harness.RepoRoot()
	files, err := filepath.Glob(filepath.Join(root, "examples", "*.yaml"))
	require.NoError(t, err)
	gatewayFiles, err := filepath.Glob(filepath.Join(root, "examples", "gateway", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, gatewayFiles)
	files = append(files, gatewayFiles...)
	chartFiles, err := filepath.Glob(filepath.Join(root, "chart", "tuna-k8s-operator", "examples", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	require.NotEmpty(t, chartFiles)

	existingSecret := readManifests(t, filepath.Join(root, "chart", "tuna-k8s-operator", "examples", "existing-secret.yaml"))
	require.Len(t, existingSecret, 1)
	foreign := map[string]func(u *unstructured.Unstructured){
		// It makes the Secret values-existing-secret.yaml names, as
		// existing-secret.yaml does by hand.
		"external-secrets.io/v1/ExternalSecret": func(u *unstructured.Unstructured) {
			target, _, _ := unstructured.NestedString(u.Object, "spec", "target", "name")
			assert.Equal(t, existingSecret[0].GetName(), target, "%s makes another Secret than existing-secret.yaml", u.GetName())
		},
	}
	accepted := 0
	for _, f := range append(files, chartFiles...) {
		rel, _ := filepath.Rel(root, f)
		objs := readManifests(t, f)
		if strings.HasPrefix(filepath.Base(f), "values-") || filepath.Base(f) == "podinfo-values.yaml" {
			for _, u := range objs {
				require.Empty(t, u.GetKind(), "%s: a values file is no Kubernetes object", rel)
			}
			continue
		}
		require.NotEmpty(t, objs, "%s holds no object", rel)
		for _, u := range objs {
			if check, ok := foreign[u.GetAPIVersion()+"/"+u.GetKind()]; ok {
				check(u)
				continue
			}
			u.SetNamespace(ns)
			assert.NoError(t, env.CP.Client.Create(ctx, u, client.DryRunAll), "%s: %s %s is refused", rel, u.GetKind(), u.GetName())
			accepted++
		}
	}
	assert.Greater(t, accepted, len(files), "every example file has at least one object")
}

var (
	expectRe   = regexp.MustCompile(`(?m)^# expect: (.+)$`)
	updateOfRe = regexp.MustCompile(`(?m)^# update-of: (.+)$`)
)

// Every file of examples/invalid/ is refused by the real API server with
// the text of its "# expect:" line, as examples/README.md tells users to
// check with kubectl. A file with "# update-of:" changes an object of the
// file it names, which is created first (for real); the others are created
// with a server-side dry run.
func TestInvalidExamplesAreRefused(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	files, err := filepath.Glob(filepath.Join(harness.RepoRoot(), "examples", "invalid", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		text, err := os.ReadFile(f)
		require.NoError(t, err)
		m := expectRe.FindSubmatch(text)
		require.NotNil(t, m, "%s has no # expect: line", f)
		expect := strings.TrimSpace(string(m[1]))
		objs := readManifests(t, f)
		require.Len(t, objs, 1, f)
		bad := objs[0]
		bad.SetNamespace(ns)
		if u := updateOfRe.FindSubmatch(text); u != nil {
			base := filepath.Join(filepath.Dir(f), strings.TrimSpace(string(u[1])))
			var old *unstructured.Unstructured
			for _, o := range readManifests(t, base) {
				if o.GetKind() == bad.GetKind() && o.GetName() == bad.GetName() {
					old = o
				}
			}
			require.NotNil(t, old, "%s: %s has no %s %s", f, base, bad.GetKind(), bad.GetName())
			// Each update gets an object of its own name.
			name := strings.TrimSuffix(filepath.Base(f), ".yaml")
			old.SetNamespace(ns)
			old.SetName(name)
			require.NoError(t, env.CP.Client.Create(ctx, old), "%s: creating the object it updates", f)
			// Released on the edge before the next test: examples name
			// addresses (my-app, postgres) that other tests reserve.
			gone := &unstructured.Unstructured{}
			gone.SetGroupVersionKind(old.GroupVersionKind())
			t.Cleanup(func() { deleteAndWait(t, gone, key(ns, name)) })
			// The controller writes the object too (finalizer, status):
			// replace the spec of the latest version, as kubectl apply
			// would, until no write came in between.
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur := &unstructured.Unstructured{}
				cur.SetGroupVersionKind(old.GroupVersionKind())
				if err := env.CP.Client.Get(ctx, key(ns, name), cur); err != nil {
					return err
				}
				cur.Object["spec"] = bad.Object["spec"]
				return env.CP.Client.Update(ctx, cur, client.DryRunAll)
			})
		} else {
			err = env.CP.Client.Create(ctx, bad, client.DryRunAll)
		}
		if assert.Error(t, err, "%s is accepted", filepath.Base(f)) {
			assert.Contains(t, err.Error(), expect, "%s", filepath.Base(f))
		}
	}
}
