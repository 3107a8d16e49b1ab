package status

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func object(name, uid string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}}
}

func TestTransitionsOncePerChange(t *testing.T) {
	var tr Transitions
	connected := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Connected"}
	refused := metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "UpstreamRefused"}
	steps := []struct {
		name   string
		cached *metav1.Condition
		write  metav1.Condition
		want   bool
	}{
		{"first write, nothing cached", nil, connected, true},
		{"same again, cache still empty (lagging)", nil, connected, false},
		{"same again, cache caught up", &connected, connected, false},
		{"real change", &connected, refused, true},
		{"same, cache lagging behind the change", &connected, refused, false},
		{"back", &refused, connected, true},
	}
	for _, s := range steps {
		if got := tr.Changed(object("a", "uid-1"), s.cached, s.write); got != s.want {
			t.Errorf("%s: Changed = %v, want %v", s.name, got, s.want)
		}
	}
	// A process that starts fresh trusts the cache.
	var fresh Transitions
	if fresh.Changed(object("a", "uid-1"), &connected, connected) {
		t.Error("a fresh process must not repeat an event the cache already shows")
	}
	// A new object of the name is judged by its own cached condition.
	if !tr.Changed(object("a", "uid-2"), nil, connected) {
		t.Error("a re-created object's first write is a transition")
	}
	// A gone object is forgotten: nothing is kept for it.
	tr.Changed(object("b", "uid-3"), nil, refused)
	if tr.Len() != 2 {
		t.Fatalf("Len = %d, want 2", tr.Len())
	}
	tr.Forget(types.NamespacedName{Namespace: "ns", Name: "a"})
	tr.Forget(types.NamespacedName{Namespace: "ns", Name: "b"})
	if tr.Len() != 0 {
		t.Fatalf("Len after Forget = %d, want 0", tr.Len())
	}
}
