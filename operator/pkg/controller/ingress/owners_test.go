package ingress

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	edgeclient "code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/keysecret"
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
	f.edge.domains[host] = edgeclient.Domain{Name: host, Verified: true, Sharing: edgeclient.Sharing{Owner: "c1/demo"}}
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
	f.edge.domains[host] = edgeclient.Domain{Name: host, Verified: true,
		Sharing: edgeclient.Sharing{Owner: "c1/demo", SharedWith: []string{"c1/attacker"}}}
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
	f.edge.domains[host] = edgeclient.Domain{Name: host, Verified: true, Sharing: edgeclient.Sharing{Owner: "c1/demo"}}
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
