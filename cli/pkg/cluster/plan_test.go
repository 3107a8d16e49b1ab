package cluster

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestDiffFields(t *testing.T) {
	a := map[string]any{
		"metadata": map[string]any{"name": "x", "labels": map[string]any{"a": "1"}},
		"spec": map[string]any{"replicas": int64(1), "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "c", "args": []any{"--a"}}},
		}}},
		"data": map[string]any{"api-key": "c2VjcmV0"},
	}
	b := map[string]any{
		"metadata": map[string]any{"name": "x", "labels": map[string]any{"a": "1", "b": "2"}},
		"spec": map[string]any{"replicas": int64(2), "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "c", "args": []any{"--a", "--b"}}},
		}}},
		"data": map[string]any{"api-key": "b3RoZXI="},
	}
	got := DiffFields(a, b)
	want := []string{"data.api-key", "metadata.labels.b", "spec.replicas", "spec.template.spec.containers[0].args"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DiffFields = %v, want %v", got, want)
	}
	if d := DiffFields(a, a); len(d) != 0 {
		t.Fatalf("no difference expected: %v", d)
	}
}

func TestNormalizeIgnoresServerFields(t *testing.T) {
	live := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "x", "resourceVersion": "5", "generation": int64(3), "uid": "u",
			"creationTimestamp": "2020-01-01T00:00:00Z", "managedFields": []any{map[string]any{"manager": "helm"}}},
		"spec":   map[string]any{"a": "b"},
		"status": map[string]any{"ready": true},
	}}
	applied := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "x", "resourceVersion": "6", "generation": int64(4), "uid": "u",
			"managedFields": []any{map[string]any{"manager": "other"}}},
		"spec": map[string]any{"a": "b"},
	}}
	if d := DiffFields(normalize(live), normalize(applied)); len(d) != 0 {
		t.Fatalf("server-set fields count as changes: %v", d)
	}
}

func crd(versions ...map[string]any) *unstructured.Unstructured {
	vs := []any{}
	for _, v := range versions {
		vs = append(vs, v)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "tunnels.k8s.tuna.am"},
		"spec": map[string]any{
			"group": "k8s.tuna.am", "scope": "Namespaced",
			"names":    map[string]any{"kind": "Tunnel", "plural": "tunnels"},
			"versions": vs,
		},
	}}
}

func crdVersion(name string, storage bool, props map[string]any) map[string]any {
	return map[string]any{"name": name, "served": true, "storage": storage,
		"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": props}}}
}

func TestSummarizeCRD(t *testing.T) {
	old := crd(crdVersion("v1alpha1", true, map[string]any{"spec": map[string]any{"type": "object"}}))
	if s := SummarizeCRD(old, old); len(s) != 0 {
		t.Fatalf("same CRD: %v", s)
	}
	changed := crd(crdVersion("v1alpha1", true, map[string]any{"spec": map[string]any{"type": "object", "description": "new"}}))
	if s := SummarizeCRD(old, changed); !reflect.DeepEqual(s, []string{"schema of version v1alpha1 changed"}) {
		t.Fatalf("schema change: %v", s)
	}
	newer := crd(crdVersion("v1alpha1", false, map[string]any{"spec": map[string]any{"type": "object"}}),
		crdVersion("v1beta1", true, map[string]any{"spec": map[string]any{"type": "object"}}))
	want := []string{"version v1alpha1: storage true→false", "new version v1beta1"}
	if s := SummarizeCRD(old, newer); !reflect.DeepEqual(s, want) {
		t.Fatalf("new version: %v, want %v", s, want)
	}
	if s := SummarizeCRD(newer, old); !reflect.DeepEqual(s, []string{"version v1alpha1: storage false→true", "version v1beta1 removed"}) {
		t.Fatalf("removed version: %v", s)
	}
}
