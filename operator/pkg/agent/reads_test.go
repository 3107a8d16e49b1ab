package agent

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/proxy"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/session"
)

// A Tunnel's reads of its Service and key Secret are reused only while
// they are younger than freshFor and the Tunnel is the same in what they
// depend on: its spec, the key the controller issued, the key's
// condition. Anything else reads again.
func TestReadsAreReusedOnlyWhileFreshAndUnchanged(t *testing.T) {
	key := types.NamespacedName{Namespace: "team", Name: "web"}
	tunnel := func(generation int64, keyID, issued string) *tunav1.Tunnel {
		return &tunav1.Tunnel{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: "u1", Generation: generation},
			Status: tunav1.TunnelStatus{KeyID: keyID, Conditions: []metav1.Condition{
				{Type: tunav1.ConditionKeyIssued, Status: metav1.ConditionTrue, Reason: issued},
			}},
		}
	}
	read := tunnel(1, "k1", "Issued")
	at := time.Unix(1000, 0)
	up := proxy.Upstream{Scheme: "http", Addr: "10.0.0.4:8080"}
	cfg := session.Config{Bind: bindRequest(read, "web")}
	var r reads
	within := freshFor(10)
	r.store(key, read, at, within, up, cfg)

	gotUp, gotCfg, ok := r.fresh(key, tunnel(1, "k1", "Issued"), at.Add(within-time.Millisecond))
	if !ok || gotUp != up || gotCfg.Bind.Subdomain != "web" {
		t.Fatalf("the same Tunnel within freshFor: reads not reused (%v, %+v, %+v)", ok, gotUp, gotCfg)
	}
	for name, c := range map[string]struct {
		tun *tunav1.Tunnel
		now time.Time
	}{
		"freshFor later":            {tunnel(1, "k1", "Issued"), at.Add(within)},
		"a changed spec":            {tunnel(2, "k1", "Issued"), at.Add(time.Second)},
		"a new key":                 {tunnel(1, "k2", "Issued"), at.Add(time.Second)},
		"the key's condition":       {tunnel(1, "k1", "Revoked"), at.Add(time.Second)},
		"another Tunnel, same name": {func() *tunav1.Tunnel { t := tunnel(1, "k1", "Issued"); t.UID = "u2"; return t }(), at.Add(time.Second)},
	} {
		if _, _, ok := r.fresh(key, c.tun, c.now); ok {
			t.Errorf("%s: the last reads were reused", name)
		}
	}
	r.forget(key)
	if _, _, ok := r.fresh(key, read, at); ok {
		t.Error("forgotten reads were reused")
	}
	for _, n := range []int64{0, 10, 600, 601, 10_000, 100_000} {
		if p := resyncPeriod(n); freshFor(n) >= p*4/5 {
			t.Errorf("%d Tunnels: freshFor %v; a periodic re-read, due four fifths of the period (%v) after the last read, must read", n, freshFor(n), p)
		}
	}
}
