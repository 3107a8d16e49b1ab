package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// applyExample creates every object of examples/<file> in namespace ns, as
// `kubectl apply -n ns -f examples/<file>` would, after edit changes each
// object (nil: as written). It returns the objects.
func applyExample(t *testing.T, ns, file string, edit func(*unstructured.Unstructured)) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "examples", file))
	require.NoError(t, err)
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		u := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &u.Object); err != nil || len(u.Object) == 0 {
			require.NoError(t, err)
			continue
		}
		u.SetNamespace(ns)
		if edit != nil {
			edit(u)
		}
		require.NoError(t, env.cp.Client.Create(context.Background(), u), "creating %s %s from examples/%s", u.GetKind(), u.GetName(), file)
		objs = append(objs, u)
	}
	require.NotEmpty(t, objs, "examples/%s holds no object", file)
	return objs
}
