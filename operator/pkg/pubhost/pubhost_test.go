package pubhost

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// configMaps is a source of published hosts for the test: a ConfigMap
// publishes the hosts of its data key "hosts" and is served unless its
// label "served" says "no".
var configMaps = Source[*corev1.ConfigMap, *corev1.ConfigMapList]{
	Kind:    "ConfigMaps",
	NewList: func() *corev1.ConfigMapList { return &corev1.ConfigMapList{} },
	Items: func(l *corev1.ConfigMapList) []*corev1.ConfigMap {
		out := make([]*corev1.ConfigMap, len(l.Items))
		for i := range l.Items {
			out[i] = &l.Items[i]
		}
		return out
	},
	Serving: func(context.Context, client.Reader) (func(*corev1.ConfigMap) bool, error) {
		return func(cm *corev1.ConfigMap) bool { return cm.Labels["served"] != "no" }, nil
	},
	Hosts: func(cm *corev1.ConfigMap) []string { return strings.Fields(cm.Data["hosts"]) },
}

func cm(ns, name string, created int64, hosts string, served bool) *corev1.ConfigMap {
	c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(time.Unix(created, 0))},
		Data: map[string]string{"hosts": hosts}}
	if !served {
		c.Labels = map[string]string{"served": "no"}
	}
	return c
}

func names(objs []*corev1.ConfigMap) string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Namespace+"/"+o.Name)
	}
	return strings.Join(out, ",")
}

func TestSourceListsServedObjectsOldestFirst(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	reader := crfake.NewClientBuilder().WithScheme(scheme).
		WithObjects(cm("b", "new", 300, "a.example", true), cm("b", "z", 100, "a.example b.example", true),
			cm("a", "z", 100, "a.example", true), cm("a", "off", 50, "a.example c.example", false)).
		WithIndex(&corev1.ConfigMap{}, Index, configMaps.IndexHosts).Build()
	ctx := context.Background()

	for ns, want := range map[string]string{"": "a/z,b/z,b/new", "b": "b/z,b/new"} {
		var namespaces []string
		if ns != "" {
			namespaces = []string{ns}
		}
		got, err := configMaps.Served(ctx, reader, namespaces...)
		if err != nil || names(got) != want {
			t.Errorf("Served(%q) = %s, %v; want %s (oldest first, ties by namespace/name, none unserved)", ns, names(got), err, want)
		}
	}
	got, err := configMaps.ServedFor(ctx, reader, "b.example")
	if err != nil || names(got) != "b/z" {
		t.Errorf("ServedFor(b.example) = %s, %v", names(got), err)
	}
	if got, _ := configMaps.ServedFor(ctx, reader, "c.example"); len(got) != 0 {
		t.Errorf("ServedFor found the unserved object: %s", names(got))
	}
	hosts, err := ServedHosts(ctx, reader, nil, configMaps)
	if err != nil || len(hosts) != 2 || !hosts["a.example"] || !hosts["b.example"] {
		t.Errorf("ServedHosts = %v, %v; want a.example and b.example", hosts, err)
	}
}

func TestFilterKeepsOrderOfAge(t *testing.T) {
	in := []*corev1.ConfigMap{cm("b", "x", 2, "", true), cm("a", "y", 2, "", true), cm("a", "x", 2, "", false), cm("c", "x", 1, "", true)}
	got := Filter(in, func(c *corev1.ConfigMap) bool { return c.Labels["served"] != "no" })
	if names(got) != "c/x,a/y,b/x" {
		t.Fatalf("Filter = %s", names(got))
	}
	if !slices.Equal(configMaps.IndexHosts(cm("a", "x", 1, "h1 h2", true)), []string{"h1", "h2"}) || configMaps.IndexHosts(&corev1.Secret{}) != nil {
		t.Fatal("IndexHosts")
	}
}

func TestPathTypeNames(t *testing.T) {
	if Prefix.String() != "Prefix" || Exact.String() != "Exact" {
		t.Fatalf("%s %s", Prefix, Exact)
	}
	v := ValueMatch{Name: "x", Value: "1"}
	if !v.Matches("1", true) || v.Matches("1", false) || v.Matches("2", true) {
		t.Fatal("ValueMatch")
	}
}
