package orphans

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi/fake"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/keysecret"
)

// An Ingress host's key belongs to the host: it is revoked, with its
// Secret, once no served Ingress publishes the host; without a way to
// tell (no IngressHosts), it is kept.
func TestCollectIngressHosts(t *testing.T) {
	ctx := context.Background()
	kube := crfake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tuna-system", Name: keysecret.HostName("gone.example")}}).Build()
	edge := fake.New()
	hostKey := func(cluster, host string) string {
		return edge.AddKey(map[string]string{edgeapi.LabelCluster: cluster, edgeapi.LabelKind: "Ingress", edgeapi.LabelHost: host})
	}
	served, gone, foreign := hostKey("c1", "shop.example"), hostKey("c1", "gone.example"), hostKey("c2", "gone.example")

	c := &Collector{Reader: kube, Writer: kube, Edge: edge, ClusterID: "c1", Namespace: "tuna-system"}
	if n, err := c.Collect(ctx); err != nil || n != 0 {
		t.Fatalf("without IngressHosts nothing is revoked: %d, %v", n, err)
	}
	calls := 0
	c.IngressHosts = func(context.Context) (map[string]bool, error) {
		calls++
		return map[string]bool{"shop.example": true}, nil
	}
	n, err := c.Collect(ctx)
	if err != nil || n != 1 {
		t.Fatalf("revoked %d, %v; want the key of gone.example only", n, err)
	}
	if calls != 1 {
		t.Errorf("served hosts read %d times, want once per collection", calls)
	}
	for id, want := range map[string]bool{served: true, gone: false, foreign: true} {
		if edge.Has(id) != want {
			t.Errorf("key %s exists = %v, want %v", id, !want, want)
		}
	}
	err = kube.Get(ctx, types.NamespacedName{Namespace: "tuna-system", Name: keysecret.HostName("gone.example")}, &corev1.Secret{})
	if err == nil {
		t.Error("the host's key Secret must be deleted")
	}
}
