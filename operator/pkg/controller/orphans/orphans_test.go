package orphans

import (
	"context"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi/fake"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/keysecret"
)

func labels(cluster, ns, name, uid string) map[string]string {
	return map[string]string{edgeapi.LabelCluster: cluster, edgeapi.LabelKind: "Tunnel",
		edgeapi.LabelNamespace: ns, edgeapi.LabelName: name, edgeapi.LabelUID: uid}
}

// The collector revokes exactly the keys of this cluster whose Tunnel is
// gone or was re-created under the same name, and stops on an edge error
// without claiming success. Unit test on an in-memory edge fake and
// controller-runtime's fake client; the e2e suite covers the real thing.
func TestCollect(t *testing.T) {
	ctx := context.Background()
	live := &tunav1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: "uid-live"}}
	kube := crfake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(live,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tuna-system", Name: keysecret.Name("Tunnel", "uid-gone")}}).Build()
	edge := fake.New()
	keep := edge.AddKey(labels("c1", "team", "web", "uid-live"))
	gone := edge.AddKey(labels("c1", "team", "old", "uid-gone"))
	recreated := edge.AddKey(labels("c1", "team", "web", "uid-previous-web"))
	foreign := edge.AddKey(labels("c2", "team", "old", "uid-gone"))

	c := &Collector{Reader: kube, Writer: kube, Edge: edge, ClusterID: "c1", Namespace: "tuna-system"}
	edge.FailNext("RevokeTunnelKey", fake.APIError(http.StatusServiceUnavailable, "internal"))
	if _, err := c.Collect(ctx); err == nil {
		t.Fatal("an edge failure must surface, so the collector retries")
	}
	n, err := c.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("revoked %d keys, want 2 (the deleted and the re-created Tunnel's)", n)
	}
	for id, want := range map[string]bool{keep: true, gone: false, recreated: false, foreign: true} {
		if edge.Has(id) != want {
			t.Errorf("key %s exists = %v, want %v", id, !want, want)
		}
	}
	err = kube.Get(ctx, types.NamespacedName{Namespace: "tuna-system", Name: keysecret.Name("Tunnel", "uid-gone")}, &corev1.Secret{})
	if client.IgnoreNotFound(err) != nil || err == nil {
		t.Errorf("the orphan's key Secret must be deleted, got %v", err)
	}
}

func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := tunav1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// A controller limited to some namespaces keeps the keys of Tunnels
// elsewhere: it may not read them, so it cannot know they are gone. The
// fake client would answer NotFound there, so the test proves the collector
// never asks.
func TestCollectKeepsUnwatchedNamespaces(t *testing.T) {
	ctx := context.Background()
	kube := crfake.NewClientBuilder().WithScheme(scheme(t)).Build()
	edge := fake.New()
	watched := edge.AddKey(labels("c1", "team", "old", "uid-1"))
	elsewhere := edge.AddKey(labels("c1", "other", "old", "uid-2"))
	c := &Collector{Reader: kube, Writer: kube, Edge: edge, ClusterID: "c1", Namespace: "tuna-system",
		Watches: func(ns string) bool { return ns == "team" }}
	n, err := c.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || edge.Has(watched) || !edge.Has(elsewhere) {
		t.Errorf("revoked %d; watched key kept = %v (want false), unwatched key kept = %v (want true)", n, edge.Has(watched), edge.Has(elsewhere))
	}
}

// CollectTunnel, which the Tunnel reconciler runs when a Tunnel is gone,
// revokes only that Tunnel's keys (by namespace and name), and among them
// keeps the key of a Tunnel re-created under the same name.
func TestCollectTunnel(t *testing.T) {
	ctx := context.Background()
	recreated := &tunav1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: "uid-new"}}
	kube := crfake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(recreated).Build()
	edge := fake.New()
	goneWeb := edge.AddKey(labels("c1", "team", "web", "uid-old"))
	newWeb := edge.AddKey(labels("c1", "team", "web", "uid-new"))
	goneOther := edge.AddKey(labels("c1", "team", "api", "uid-api")) // gone too, but not asked about
	otherNamespace := edge.AddKey(labels("c1", "dev", "web", "uid-dev"))
	c := &Collector{Reader: kube, Writer: kube, Edge: edge, ClusterID: "c1", Namespace: "tuna-system"}
	n, err := c.CollectTunnel(ctx, types.NamespacedName{Namespace: "team", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("revoked %d keys, want 1 (the gone team/web's)", n)
	}
	for id, want := range map[string]bool{goneWeb: false, newWeb: true, goneOther: true, otherNamespace: true} {
		if edge.Has(id) != want {
			t.Errorf("key %s exists = %v, want %v", id, !want, want)
		}
	}
}

// countingReader counts the reads that reach a reader (the apiserver, in
// the controller), so that the test sees which owners were read directly.
type countingReader struct {
	client.Reader
	gets int
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets++
	return r.Reader.Get(ctx, key, obj, opts...)
}

// With a cache, an owner it holds with the key's UID is not read again;
// one it does not hold yet (a cache behind a create) or holds with another
// UID is read directly, and the apiserver's answer decides: the newer
// Tunnel's key is kept, the re-created Tunnel's old key revoked.
func TestCollectAsksTheCacheFirst(t *testing.T) {
	ctx := context.Background()
	cachedWeb := &tunav1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: "uid-web"}}
	newer := &tunav1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "newer", UID: "uid-newer"}}
	cache := crfake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(cachedWeb.DeepCopy()).Build()
	api := &countingReader{Reader: crfake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(cachedWeb.DeepCopy(), newer.DeepCopy()).Build()}
	edge := fake.New()
	web := edge.AddKey(labels("c1", "team", "web", "uid-web"))
	fresh := edge.AddKey(labels("c1", "team", "newer", "uid-newer"))
	stale := edge.AddKey(labels("c1", "team", "web", "uid-web-before"))

	c := &Collector{Reader: api, Cached: cache, Writer: cache, Edge: edge, ClusterID: "c1", Namespace: "tuna-system"}
	n, err := c.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || edge.Has(stale) || !edge.Has(web) || !edge.Has(fresh) {
		t.Errorf("revoked %d; kept: web %v, newer %v, the re-created web's old key %v; want only the old key revoked",
			n, edge.Has(web), edge.Has(fresh), edge.Has(stale))
	}
	if api.gets != 2 {
		t.Errorf("%d direct reads, want 2: the owner the cache lacks and the one it holds with another UID", api.gets)
	}
}
