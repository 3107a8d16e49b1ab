package scope

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestList(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cm := func(ns, name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	reader := crfake.NewClientBuilder().WithScheme(scheme).WithObjects(cm("a", "1"), cm("b", "2"), cm("b", "3"), cm("c", "4")).Build()
	names := func(namespaces ...string) []string {
		var list corev1.ConfigMapList
		if err := List(context.Background(), reader, &list, namespaces); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range list.Items {
			out = append(out, c.Namespace+"/"+c.Name)
		}
		return out
	}
	if got := names(); len(got) != 4 {
		t.Errorf("every namespace: %v, want 4 objects", got)
	}
	got := names("c", "b")
	if want := []string{"c/4", "b/2", "b/3"}; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("namespaces c and b: %v, want %v", got, want)
	}
	if got := names("none"); len(got) != 0 {
		t.Errorf("an empty namespace: %v", got)
	}
}
