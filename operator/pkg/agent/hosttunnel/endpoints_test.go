package hosttunnel

import (
	"context"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A slice's change wakes the hosts that dial its headless Service, and no
// longer once they stop.
func TestHeadlessWakes(t *testing.T) {
	var h sliceWakes
	svc := types.NamespacedName{Namespace: "a", Name: "db"}
	h.set("one.example", []types.NamespacedName{svc, svc})
	h.set("two.example", []types.NamespacedName{svc})
	slice := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "db-x1",
		Labels: map[string]string{discoveryv1.LabelServiceName: "db"}}}
	hosts := func() map[string]bool {
		out := map[string]bool{}
		for _, r := range h.requests(context.Background(), slice) {
			out[r.Name] = true
		}
		return out
	}
	if got := hosts(); len(got) != 2 || !got["one.example"] || !got["two.example"] {
		t.Fatalf("woken %v, want both hosts", got)
	}
	h.set("one.example", nil)
	if got := hosts(); len(got) != 1 || !got["two.example"] {
		t.Fatalf("woken %v after one.example stopped, want two.example", got)
	}
	h.set("two.example", []types.NamespacedName{{Namespace: "a", Name: "other"}})
	if got := hosts(); len(got) != 0 {
		t.Fatalf("woken %v, want none", got)
	}
	other := slice.DeepCopy()
	other.Namespace = "b"
	if got := h.requests(context.Background(), other); len(got) != 0 {
		t.Fatalf("a slice of another namespace woke %v", got)
	}
}
