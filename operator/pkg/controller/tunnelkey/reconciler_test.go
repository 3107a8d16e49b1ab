package tunnelkey

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi/fake"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// The Kubernetes side is controller-runtime's fake client and the edge the
// in-memory fake: these tests inject edge failures on exact calls, which
// the end-to-end tests do through a fault-injecting proxy.
type fixture struct {
	kube client.Client
	edge *fake.Edge
	key  types.NamespacedName
}

func newFixture(t *testing.T) *fixture {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := tunav1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	tun := &tunav1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: "uid-1", Generation: 1},
		Spec: tunav1.TunnelSpec{Protocol: tunav1.ProtocolHTTP, Subdomain: "web", Upstream: tunav1.TunnelUpstream{URL: "http://web:8080"}}}
	return &fixture{
		kube: crfake.NewClientBuilder().WithScheme(s).WithObjects(tun).WithStatusSubresource(tun).Build(),
		edge: fake.New(),
		key:  types.NamespacedName{Namespace: "team", Name: "web"},
	}
}

// reconciler is a controller process: a new one (a restart) has nothing
// of the edge cached.
func (f *fixture) reconciler() *Reconciler {
	return &Reconciler{Client: f.kube, Edge: f.edge, Info: &edgeapi.InfoCache{API: f.edge}, Namespace: "tuna-system", ClusterID: "c1"}
}

// converge runs one reconcile on a fresh read of the Tunnel and returns
// the Tunnel after it.
func (f *fixture) converge(t *testing.T, r *Reconciler) (*tunav1.Tunnel, error, bool) {
	t.Helper()
	var tun tunav1.Tunnel
	if err := f.kube.Get(context.Background(), f.key, &tun); err != nil {
		t.Fatal(err)
	}
	res, err := r.converge(context.Background(), &tun)
	if err := f.kube.Get(context.Background(), f.key, &tun); err != nil {
		t.Fatal(err)
	}
	return &tun, err, res.RequeueAfter > 0
}

func keyIssued(tun *tunav1.Tunnel) metav1.Condition {
	if c := status.Find(tun.Status.Conditions, tunav1.ConditionKeyIssued); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// An edge API failure during the key check never takes the key away: the
// agent goes on with it while KeyIssued is Unknown. That holds for a
// restart that cannot read the edge's base domain (which once read as "the
// address changed" and re-issued the key), for 5xx, and for a refused
// check; the key stays the same and comes back True.
func TestKeyCheckFailureKeepsKey(t *testing.T) {
	f := newFixture(t)
	tun, err, _ := f.converge(t, f.reconciler())
	if err != nil || keyIssued(tun).Status != metav1.ConditionTrue || tun.Status.KeyID == "" {
		t.Fatalf("first reconcile: %v, KeyIssued %+v, keyID %q", err, keyIssued(tun), tun.Status.KeyID)
	}
	keyID := tun.Status.KeyID

	for _, step := range []struct {
		name      string
		op        string
		err       error
		reason    string
		returnErr bool
	}{
		{"restart, GET /v1/edge fails", "Edge", fake.APIError(http.StatusServiceUnavailable, apiwire.CodeInternal), tunav1.ReasonEdgeUnreachable, true},
		{"key list 503", "ListTunnelKeys", fake.APIError(http.StatusServiceUnavailable, apiwire.CodeInternal), tunav1.ReasonEdgeUnreachable, true},
		{"key list 429", "ListTunnelKeys", fake.APIError(http.StatusTooManyRequests, apiwire.CodeRateLimited), tunav1.ReasonEdgeUnreachable, true},
		{"key list refused", "ListTunnelKeys", fake.APIError(http.StatusUnauthorized, apiwire.CodeUnauthorized), tunav1.ReasonAPIKeyInvalid, false},
	} {
		f.edge.FailNext(step.op, step.err)
		tun, err, requeued := f.converge(t, f.reconciler())
		cond := keyIssued(tun)
		if cond.Status != metav1.ConditionUnknown || cond.Reason != step.reason || tun.Status.KeyID != keyID {
			t.Errorf("%s: KeyIssued=%s %s (%s), keyID %q; want Unknown %s and key %s kept", step.name, cond.Status, cond.Reason, cond.Message, tun.Status.KeyID, step.reason, keyID)
		}
		if !strings.Contains(cond.Message, "keeps serving with its key "+keyID) {
			t.Errorf("%s: message %q does not say the tunnel keeps serving", step.name, cond.Message)
		}
		if (err != nil) != step.returnErr || (!step.returnErr && !requeued) {
			t.Errorf("%s: err %v, requeued %v: a transient failure backs off, a refused check is repeated", step.name, err, requeued)
		}
	}
	if !f.edge.Has(keyID) || f.edge.Calls("CreateTunnelKey") != 1 || f.edge.Calls("RevokeTunnelKey") != 0 {
		t.Fatalf("the key must stay: has %v, %d issued, %d revoked", f.edge.Has(keyID), f.edge.Calls("CreateTunnelKey"), f.edge.Calls("RevokeTunnelKey"))
	}
	tun, err, _ = f.converge(t, f.reconciler())
	if err != nil || keyIssued(tun).Status != metav1.ConditionTrue || tun.Status.KeyID != keyID {
		t.Errorf("after the API recovers: %v, KeyIssued %+v, keyID %q; want True with %s", err, keyIssued(tun), tun.Status.KeyID, keyID)
	}
}

// Without a key yet, a refusal to issue one is final until the spec
// changes (False, no retry), and a transient failure shows Unknown and
// backs off.
func TestIssueFailures(t *testing.T) {
	f := newFixture(t)
	f.edge.FailNext("CreateTunnelKey", fake.APIError(http.StatusServiceUnavailable, apiwire.CodeInternal))
	tun, err, _ := f.converge(t, f.reconciler())
	if c := keyIssued(tun); err == nil || c.Status != metav1.ConditionUnknown || c.Reason != tunav1.ReasonEdgeUnreachable {
		t.Errorf("503: %v, KeyIssued %+v; want Unknown EdgeUnreachable and backoff", err, c)
	}
	f.edge.FailNext("CreateTunnelKey", fake.APIError(http.StatusConflict, apiwire.CodeNameTaken))
	tun, err, requeued := f.converge(t, f.reconciler())
	if c := keyIssued(tun); err != nil || requeued || c.Status != metav1.ConditionFalse || c.Reason != tunav1.ReasonAddressTaken {
		t.Errorf("409: %v, requeued %v, KeyIssued %+v; want False AddressTaken, waiting for a spec change", err, requeued, c)
	}
	f.edge.FailNext("CreateTunnelKey", fake.APIError(http.StatusBadRequest, apiwire.CodeInvalidRequest))
	tun, err, requeued = f.converge(t, f.reconciler())
	if c := keyIssued(tun); err != nil || requeued || c.Status != metav1.ConditionFalse || c.Reason != tunav1.ReasonKeyIssueFailed ||
		!strings.Contains(c.Message, apiwire.CodeInvalidRequest) {
		t.Errorf("400: %v, requeued %v, KeyIssued %+v; want False KeyIssueFailed with the edge's answer", err, requeued, c)
	}
	if n := f.edge.Calls("RevokeTunnelKey"); n != 0 || tun.Status.KeyID != "" {
		t.Errorf("a refused issue leaves no key: keyID %q, %d revoked", tun.Status.KeyID, n)
	}
}

// A spec the API server let through but the operator cannot use (here an
// upstream that is not a URL, as an older CRD without the CEL rules would
// store) gets no key: KeyIssued=False InvalidSpec, and nothing is asked of
// the edge.
func TestInvalidSpecGetsNoKey(t *testing.T) {
	f := newFixture(t)
	var tun tunav1.Tunnel
	if err := f.kube.Get(context.Background(), f.key, &tun); err != nil {
		t.Fatal(err)
	}
	tun.Spec.Upstream.URL = "web:8080"
	if err := f.kube.Update(context.Background(), &tun); err != nil {
		t.Fatal(err)
	}
	got, err, _ := f.converge(t, f.reconciler())
	c := keyIssued(got)
	if err != nil || c.Status != metav1.ConditionFalse || c.Reason != tunav1.ReasonInvalidSpec || !strings.Contains(c.Message, "web:8080") {
		t.Fatalf("%v, KeyIssued %+v; want False InvalidSpec naming the URL", err, c)
	}
	if n := f.edge.Calls("CreateTunnelKey"); n != 0 || got.Status.KeyID != "" {
		t.Fatalf("no key may be issued for an invalid spec: %d issued, keyID %q", n, got.Status.KeyID)
	}
}

// A Tunnel's key is renewed once half of its TTL is gone, the Tunnel is
// looked at again when the next renewal is due, and a key that expired
// anyway (the controller was down) is replaced.
func TestKeyRenewedBeforeExpiry(t *testing.T) {
	f := newFixture(t)
	f.edge.TTL = time.Hour
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := f.reconciler()
	r.Resync, r.Now = 24*time.Hour, f.edge.Now // only renewals requeue sooner
	converge := func(at time.Duration) (time.Duration, string) {
		t.Helper()
		f.edge.SetNow(t0.Add(at))
		var cur tunav1.Tunnel
		if err := f.kube.Get(context.Background(), f.key, &cur); err != nil {
			t.Fatal(err)
		}
		res, err := r.converge(context.Background(), &cur)
		if err != nil {
			t.Fatalf("converge at +%v: %v", at, err)
		}
		if err := f.kube.Get(context.Background(), f.key, &cur); err != nil {
			t.Fatal(err)
		}
		return res.RequeueAfter, cur.Status.KeyID
	}

	next, id := converge(0)
	if id == "" || next != 30*time.Minute {
		t.Fatalf("after issuing: key %q, requeue in %v; want a key and 30m (half the TTL)", id, next)
	}
	if next, _ := converge(10 * time.Minute); next != 20*time.Minute || f.edge.Calls("RenewTunnelKey") != 0 {
		t.Fatalf("before half the TTL: requeue in %v after %d renewals, want 20m and none", next, f.edge.Calls("RenewTunnelKey"))
	}
	next, same := converge(31 * time.Minute)
	k, _ := f.edge.Key(id)
	if same != id || next != 30*time.Minute || f.edge.Calls("RenewTunnelKey") != 1 || !k.ExpiresAt.Equal(t0.Add(91*time.Minute)) {
		t.Fatalf("after renewing: key %s (was %s) until %v, requeue in %v, %d renewals; want the same key until %v, 30m, 1",
			same, id, k.ExpiresAt, next, f.edge.Calls("RenewTunnelKey"), t0.Add(91*time.Minute))
	}
	_, fresh := converge(5 * time.Hour) // renewals missed: the key expired
	if fresh == "" || fresh == id || f.edge.Has(id) {
		t.Fatalf("after expiry: key %q, old key %s still there: %v; want a new key and the old one revoked", fresh, id, f.edge.Has(id))
	}
}

// A renewal that fails for a transient reason keeps the key: it is valid
// for up to another half TTL, so the tunnel goes on serving with KeyIssued
// Unknown/EdgeUnreachable, the renewal is retried with backoff, and it
// succeeds once the edge answers again, with the same key.
func TestRenewalFailureKeepsKey(t *testing.T) {
	f := newFixture(t)
	f.edge.TTL = time.Hour
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.edge.SetNow(t0)
	r := f.reconciler()
	r.Now = f.edge.Now
	tun, err, _ := f.converge(t, r)
	if err != nil || tun.Status.KeyID == "" {
		t.Fatalf("first reconcile: %v, keyID %q", err, tun.Status.KeyID)
	}
	keyID := tun.Status.KeyID

	f.edge.SetNow(t0.Add(40 * time.Minute)) // due for renewal
	for _, injected := range []error{
		fake.APIError(http.StatusServiceUnavailable, apiwire.CodeInternal),
		fake.APIError(http.StatusTooManyRequests, apiwire.CodeRateLimited),
	} {
		f.edge.FailNext("RenewTunnelKey", injected)
		tun, err, _ := f.converge(t, r)
		cond := keyIssued(tun)
		if err == nil || cond.Status != metav1.ConditionUnknown || cond.Reason != tunav1.ReasonEdgeUnreachable || tun.Status.KeyID != keyID {
			t.Errorf("renewal fails with %v: err %v, KeyIssued=%s %s, keyID %q; want backoff, Unknown EdgeUnreachable and key %s kept",
				injected, err, cond.Status, cond.Reason, tun.Status.KeyID, keyID)
		}
	}
	if !f.edge.Has(keyID) || f.edge.Calls("CreateTunnelKey") != 1 || f.edge.Calls("RevokeTunnelKey") != 0 {
		t.Fatalf("the key must stay: has %v, %d issued, %d revoked", f.edge.Has(keyID), f.edge.Calls("CreateTunnelKey"), f.edge.Calls("RevokeTunnelKey"))
	}

	tun, err, _ = f.converge(t, r)
	k, _ := f.edge.Key(keyID)
	if err != nil || keyIssued(tun).Status != metav1.ConditionTrue || tun.Status.KeyID != keyID || !k.ExpiresAt.Equal(t0.Add(100*time.Minute)) {
		t.Errorf("after the edge recovers: %v, KeyIssued %+v, keyID %q, expiry %v; want True, key %s renewed until %v",
			err, keyIssued(tun), tun.Status.KeyID, k.ExpiresAt, keyID, t0.Add(100*time.Minute))
	}
}
