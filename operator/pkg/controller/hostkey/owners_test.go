package hostkey

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/keysecret"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

// An Ingress of another namespace cannot publish a host whose reservation
// a namespace owns until the owner shares it; the key stays the owner's
// and its Secret names the namespaces the agent may serve.
func TestHostOwnedByAnotherNamespace(t *testing.T) {
	owner := tunaIngress("demo", "shop", host)
	attacker := tunaIngress("attacker", "shop", host)
	// The attacker's Ingress is the older one: age must not decide.
	attacker.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour))
	f := newFixture(t, owner, attacker)
	f.edge.domains[host] = apiwire.Domain{Name: host, Verified: true, Sharing: apiwire.Sharing{Owner: "c1/demo"}}
	r := f.reconciler()
	reconcileHost(t, r)
	keys := f.keys(t)
	if len(keys) != 1 || keys[0].Owner != "c1/demo" {
		t.Fatalf("keys %+v, want one of owner c1/demo", keys)
	}
	if s := f.secret(t); s == nil || string(s.Data[keysecret.KeyNamespaces]) != "demo" {
		t.Fatalf("Secret %+v must limit the host to namespace demo", s)
	}
	ev := f.drain()
	if len(ev) != 1 || !strings.Contains(ev[0], ReasonAddressOwned) || !strings.Contains(ev[0], "namespace demo") ||
		!strings.Contains(ev[0], "add namespace attacker to spec.sharedWith") {
		t.Fatalf("events %v, want one AddressOwned naming namespace demo", ev)
	}

	// Shared: both namespaces are served, through a new key and Secret.
	f.edge.domains[host] = apiwire.Domain{Name: host, Verified: true,
		Sharing: apiwire.Sharing{Owner: "c1/demo", SharedWith: []string{"c1/attacker"}}}
	reconcileHost(t, r)
	keys = f.keys(t)
	if len(keys) != 1 || keys[0].Owner != "c1/demo" {
		t.Fatalf("keys after sharing %+v", keys)
	}
	if s := f.secret(t); s == nil || string(s.Data[keysecret.KeyNamespaces]) != "attacker,demo" || string(s.Data[keysecret.KeyKeyID]) != keys[0].ID {
		t.Fatalf("Secret after sharing %+v", s)
	}
}

// Without the owner's own Ingress, a foreign namespace gets no key at all.
func TestHostOnlyForeignIngress(t *testing.T) {
	f := newFixture(t, tunaIngress("attacker", "shop", host))
	f.edge.domains[host] = apiwire.Domain{Name: host, Verified: true, Sharing: apiwire.Sharing{Owner: "c1/demo"}}
	r := f.reconciler()
	if res := reconcileHost(t, r); res.RequeueAfter <= 0 {
		t.Error("a refused host is looked at again: its owner may share it")
	}
	if keys := f.keys(t); len(keys) != 0 || f.secret(t) != nil {
		t.Fatalf("keys %+v for a host the namespace does not own", keys)
	}
	if ev := f.drain(); len(ev) != 1 || !strings.Contains(ev[0], ReasonAddressOwned) {
		t.Fatalf("events %v", ev)
	}
}

// On an edge that takes any host, an unreserved host outside the base
// domain, or one of the edge's Gateway addresses, is published without a
// Domain, and only for the namespace that published it first: a younger
// namespace's Ingress is refused, as the edge would refuse its key.
func TestFirstPublisherClaimsAnUnreservedHost(t *testing.T) {
	for _, h := range []string{"shop.example.net", "192.0.2.7"} {
		first := tunaIngress("first", "shop", h)
		first.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour))
		second := tunaIngress("second", "shop", h)
		second.CreationTimestamp = metav1.NewTime(time.Now())
		f := newFixture(t, first, second)
		r := f.reconciler()
		request := func() {
			t.Helper()
			if _, err := r.Reconcile(context.Background(), pubhost.Request(h)); err != nil {
				t.Fatal(err)
			}
		}
		request()
		if keys, _ := f.edge.ListTunnelKeys(context.Background(), map[string]string{edgeapi.LabelHost: h}); len(keys) != 0 {
			t.Fatalf("%s: keys %+v on an edge that takes only its own names", h, keys)
		}
		f.drain()

		f.edge.anyHost, f.edge.gatewayAddresses = true, []string{"192.0.2.7"}
		r = f.reconciler() // the edge's facts are read once per process
		request()
		keys, _ := f.edge.ListTunnelKeys(context.Background(), map[string]string{edgeapi.LabelHost: h})
		if len(keys) != 1 || keys[0].Owner != "c1/first" || keys[0].Address != h {
			t.Fatalf("%s: keys %+v, want one of owner c1/first", h, keys)
		}
		var s corev1.Secret
		if err := f.kube.Get(context.Background(), types.NamespacedName{Namespace: "tuna-system", Name: keysecret.HostName(h)}, &s); err != nil ||
			string(s.Data[keysecret.KeyNamespaces]) != "first" {
			t.Fatalf("%s: Secret %v %v must limit the host to namespace first", h, s.Data, err)
		}
		ev := f.drain()
		if len(ev) != 1 || !strings.Contains(ev[0], ReasonAddressOwned) || !strings.Contains(ev[0], "published first by namespace first") {
			t.Fatalf("%s: events %v, want one AddressOwned for namespace second", h, ev)
		}
	}
}

// A Gateway address the controller moves to a publisher of another
// namespace (the gateway controller decides who holds it) gets that
// namespace's key: the previous holder's keys are revoked first, since the
// edge lets a new owner claim the address only once the old owner's last
// key for it is gone.
func TestGatewayAddressMovesToAnotherNamespace(t *testing.T) {
	const addr = "192.0.2.7"
	first := tunaIngress("first", "shop", addr)
	f := newFixture(t, first)
	f.edge.gatewayAddresses, f.edge.claims = []string{addr}, true
	r := f.reconciler()
	request := func() {
		t.Helper()
		if _, err := r.Reconcile(context.Background(), pubhost.Request(addr)); err != nil {
			t.Fatal(err)
		}
	}
	request()
	keys, _ := f.edge.ListTunnelKeys(context.Background(), map[string]string{edgeapi.LabelHost: addr})
	if len(keys) != 1 || keys[0].Owner != "c1/first" {
		t.Fatalf("keys %+v, want one of owner c1/first", keys)
	}
	if err := f.kube.Delete(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	if err := f.kube.Create(context.Background(), tunaIngress("second", "shop", addr)); err != nil {
		t.Fatal(err)
	}
	request()
	keys, _ = f.edge.ListTunnelKeys(context.Background(), map[string]string{edgeapi.LabelHost: addr})
	if len(keys) != 1 || keys[0].Owner != "c1/second" {
		t.Fatalf("keys %+v, want one of owner c1/second (events %v)", keys, f.drain())
	}
}
