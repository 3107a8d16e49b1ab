package metrics

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// A scraped collector says nothing until it is pointed at a reader, then
// counts what the reader holds at each scrape, and follows the reader it
// was pointed at last (a controller started again).
func TestScrapedCountsFromTheLastReader(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := tunav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	tunnel := func(name string, st metav1.ConditionStatus) *tunav1.Tunnel {
		return &tunav1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name},
			Status: tunav1.TunnelStatus{Conditions: []metav1.Condition{{Type: tunav1.ConditionKeyIssued, Status: st}}}}
	}
	s := &scraped{descs: tunnelKeys.descs}
	if n := testutil.CollectAndCount(s); n != 0 {
		t.Fatalf("%d metrics before a reader is set, want none", n)
	}
	observe := func(objs ...*tunav1.Tunnel) {
		b := crfake.NewClientBuilder().WithScheme(scheme)
		for _, o := range objs {
			b = b.WithObjects(o)
		}
		reader := b.Build()
		s.observe(func(ctx context.Context, ch chan<- prometheus.Metric) { countTunnelKeys(ctx, reader, ch) })
	}
	observe(tunnel("a", metav1.ConditionTrue), tunnel("b", metav1.ConditionFalse))
	want := `
# HELP tuna_tunnel_keys Tunnels by the state of their key (condition KeyIssued): issued, pending, failed.
# TYPE tuna_tunnel_keys gauge
tuna_tunnel_keys{state="failed"} 1
tuna_tunnel_keys{state="issued"} 1
tuna_tunnel_keys{state="pending"} 0
`
	if err := testutil.CollectAndCompare(s, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	observe(tunnel("c", metav1.ConditionTrue), tunnel("d", metav1.ConditionTrue), tunnel("e", metav1.ConditionTrue))
	if err := testutil.CollectAndCompare(s, strings.NewReader(strings.Replace(strings.Replace(want, `"failed"} 1`, `"failed"} 0`, 1), `"issued"} 1`, `"issued"} 3`, 1))); err != nil {
		t.Fatal(err)
	}
}
