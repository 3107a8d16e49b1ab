package status

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
		if got := tr.Changed("uid-1", s.cached, s.write); got != s.want {
			t.Errorf("%s: Changed = %v, want %v", s.name, got, s.want)
		}
	}
	// A process that starts fresh trusts the cache.
	var fresh Transitions
	if fresh.Changed("uid-1", &connected, connected) {
		t.Error("a fresh process must not repeat an event the cache already shows")
	}
}
