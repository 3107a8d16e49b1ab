package tunnelkey

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi/fake"
)

// A Tunnel's key is renewed once half of its TTL is gone, the Tunnel is
// looked at again when the next renewal is due, and a key that expired
// anyway (the controller was down) is replaced.
func TestKeyRenewedBeforeExpiry(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := tunav1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	tun := &tunav1.Tunnel{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: "uid-web"},
		Spec: tunav1.TunnelSpec{Protocol: tunav1.ProtocolHTTP, Subdomain: "web",
			Upstream: tunav1.TunnelUpstream{URL: "http://web:8080"}},
	}
	kube := crfake.NewClientBuilder().WithScheme(s).WithObjects(tun).WithStatusSubresource(&tunav1.Tunnel{}).Build()
	edge := fake.New()
	edge.TTL = time.Hour
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	edge.SetNow(t0)
	r := &Reconciler{Client: kube, Edge: edge, Namespace: "tuna-system", ClusterID: "c1",
		Info: &edgeapi.InfoCache{API: edge}, Resync: 24 * time.Hour, Now: edge.Now}
	ctx := context.Background()
	converge := func(at time.Duration) (time.Duration, string) {
		t.Helper()
		edge.SetNow(t0.Add(at))
		var cur tunav1.Tunnel
		if err := kube.Get(ctx, types.NamespacedName{Namespace: "team", Name: "web"}, &cur); err != nil {
			t.Fatal(err)
		}
		res, err := r.converge(ctx, &cur)
		if err != nil {
			t.Fatalf("converge at +%v: %v", at, err)
		}
		if err := kube.Get(ctx, types.NamespacedName{Namespace: "team", Name: "web"}, &cur); err != nil {
			t.Fatal(err)
		}
		return res.RequeueAfter, cur.Status.KeyID
	}

	next, id := converge(0)
	if id == "" || next != 30*time.Minute {
		t.Fatalf("after issuing: key %q, requeue in %v; want a key and 30m (half the TTL)", id, next)
	}
	if next, _ := converge(10 * time.Minute); next != 20*time.Minute || edge.Calls("RenewTunnelKey") != 0 {
		t.Fatalf("before half the TTL: requeue in %v after %d renewals, want 20m and none", next, edge.Calls("RenewTunnelKey"))
	}
	next, same := converge(31 * time.Minute)
	k, _ := edge.Key(id)
	if same != id || next != 30*time.Minute || edge.Calls("RenewTunnelKey") != 1 || !k.ExpiresAt.Equal(t0.Add(91*time.Minute)) {
		t.Fatalf("after renewing: key %s (was %s) until %v, requeue in %v, %d renewals; want the same key until %v, 30m, 1",
			same, id, k.ExpiresAt, next, edge.Calls("RenewTunnelKey"), t0.Add(91*time.Minute))
	}
	_, fresh := converge(5 * time.Hour) // renewals missed: the key expired
	if fresh == "" || fresh == id || edge.Has(id) {
		t.Fatalf("after expiry: key %q, old key %s still there: %v; want a new key and the old one revoked", fresh, id, edge.Has(id))
	}
}
