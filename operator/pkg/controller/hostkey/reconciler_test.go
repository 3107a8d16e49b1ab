package hostkey

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi/fake"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/ingress"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/keysecret"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

type fakeEdge = fake.Edge

// edge is the in-memory fake plus what Ingress hosts need: domain lookups
// and live sessions on keys.
type edge struct {
	*fakeEdge
	mu       sync.Mutex
	domains  map[string]apiwire.Domain
	sessions map[string]bool // key ID -> a live session uses it
	// domainErrs fail the next GetDomain calls, in order.
	domainErrs []error
	// anyHost and gatewayAddresses are what GET /v1/edge says besides
	// the fake's facts.
	anyHost          bool
	gatewayAddresses []string
	// claims refuses a key for an address that another owner's key
	// names, as the real edge refuses it while that owner's claim holds
	// (edge/internal/store issueKey): the fake keeps no claims.
	claims bool
}

func (e *edge) CreateTunnelKey(ctx context.Context, in apiwire.CreateTunnelKey) (*apiwire.TunnelKey, error) {
	if e.claims {
		keys, err := e.fakeEdge.ListTunnelKeys(ctx, nil)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			if k.Address == in.Address && k.Owner != in.Owner {
				return nil, &apiwire.APIError{Status: http.StatusForbidden, Code: apiwire.CodeAddressOwned, Owner: k.Owner, Address: k.Address, Claim: true}
			}
		}
	}
	return e.fakeEdge.CreateTunnelKey(ctx, in)
}

func (e *edge) Edge(ctx context.Context) (*apiwire.EdgeInfo, error) {
	info, err := e.fakeEdge.Edge(ctx)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	info.AnyHost, info.GatewayAddresses = e.anyHost, e.gatewayAddresses
	return info, nil
}

func (e *edge) GetDomain(_ context.Context, name string) (*apiwire.Domain, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.domainErrs) > 0 {
		err := e.domainErrs[0]
		e.domainErrs = e.domainErrs[1:]
		return nil, err
	}
	d, ok := e.domains[name]
	if !ok {
		return nil, fake.APIError(http.StatusNotFound, apiwire.CodeNotFound)
	}
	return &d, nil
}

func (e *edge) ListTunnelKeys(ctx context.Context, labels map[string]string) ([]apiwire.TunnelKey, error) {
	keys, err := e.fakeEdge.ListTunnelKeys(ctx, labels)
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range keys {
		if e.sessions[keys[i].ID] {
			keys[i].Session = &apiwire.Session{ID: "ses_" + keys[i].ID}
		}
	}
	return keys, err
}

const host = "shop.tuna.test"

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

func tunaIngress(ns, name, h string) *networkingv1.Ingress {
	class := ingress.ClassName
	return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name)},
		Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{{Host: h}}}}
}

type fixture struct {
	kube   client.Client
	edge   *edge
	events *events.FakeRecorder
}

func newFixture(t *testing.T, objs ...client.Object) *fixture {
	objs = append(objs, &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: ingress.ClassName},
		Spec: networkingv1.IngressClassSpec{Controller: ingress.ControllerName}})
	return &fixture{
		kube: crfake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(objs...).
			WithIndex(&networkingv1.Ingress{}, pubhost.Index, ingress.Source.IndexHosts).Build(),
		edge:   &edge{fakeEdge: fake.New(), domains: map[string]apiwire.Domain{}, sessions: map[string]bool{}},
		events: events.NewFakeRecorder(100),
	}
}

// reconciler is a controller process; a new one models a restart.
func (f *fixture) reconciler() *Reconciler {
	return &Reconciler{Client: f.kube, Edge: f.edge, Info: &edgeapi.InfoCache{API: f.edge}, Namespace: "tuna-system",
		ClusterID: "c1", Recorder: f.events}
}

func (f *fixture) keys(t *testing.T) []apiwire.TunnelKey {
	t.Helper()
	keys, err := f.edge.ListTunnelKeys(context.Background(), map[string]string{edgeapi.LabelHost: host})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func (f *fixture) secret(t *testing.T) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	err := f.kube.Get(context.Background(), types.NamespacedName{Namespace: "tuna-system", Name: keysecret.HostName(host)}, &s)
	if client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	if err != nil {
		return nil
	}
	return &s
}

func reconcileHost(t *testing.T, r *Reconciler) reconcile.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), pubhost.Request(host))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (f *fixture) drain() []string {
	var out []string
	for {
		select {
		case e := <-f.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// A host of a Ready Domain gets one key, labelled with the cluster and
// the host, handed over in the host's Secret; reconciling again keeps it.
func TestKeyPerHost(t *testing.T) {
	d := &tunav1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "shop"},
		Status: tunav1.DomainStatus{FQDN: host, Conditions: []metav1.Condition{{Type: tunav1.ConditionReady, Status: metav1.ConditionTrue}}}}
	f := newFixture(t, d, tunaIngress("team", "a", host), tunaIngress("team", "b", host))
	r := f.reconciler()
	if res := reconcileHost(t, r); res.RequeueAfter <= 0 {
		t.Error("a served host is re-checked periodically")
	}
	keys := f.keys(t)
	if len(keys) != 1 {
		t.Fatalf("%d keys, want 1 for the host whichever Ingresses serve it", len(keys))
	}
	k := keys[0]
	want := map[string]string{edgeapi.LabelCluster: "c1", edgeapi.LabelKind: "Ingress", edgeapi.LabelHost: host}
	if k.Address != host || k.Protocol != "http" || len(k.Labels) != 4 || k.Labels[edgeapi.LabelHost] != host || k.Labels[edgeapi.LabelCluster] != "c1" ||
		k.Owner != "c1/team" {
		t.Errorf("key %+v, want address %s, protocol http, labels %v", k, host, want)
	}
	s := f.secret(t)
	if s == nil || string(s.Data[keysecret.KeyKeyID]) != k.ID || string(s.Data[keysecret.KeyTunnelKey]) == "" ||
		string(s.Data[keysecret.KeyLBHostname]) != host || s.Annotations[keysecret.AnnotationHost] != host ||
		string(s.Data[keysecret.KeyNamespaces]) != "team" {
		t.Fatalf("Secret %+v does not hand over key %s", s, k.ID)
	}
	reconcileHost(t, r)
	if got := f.keys(t); len(got) != 1 || got[0].ID != k.ID || f.edge.Calls("CreateTunnelKey") != 1 {
		t.Errorf("a second reconcile must keep the key, got %v after %d creations", got, f.edge.Calls("CreateTunnelKey"))
	}
	if ev := f.drain(); len(ev) != 0 {
		t.Errorf("no events for a served host, got %v", ev)
	}
}

// The controller never reads Secrets: after a restart it keeps a key only
// when a live session proves the agent holds it, and otherwise hands over
// a fresh one before revoking the old.
func TestHandOverAfterRestart(t *testing.T) {
	f := newFixture(t, tunaIngress("team", "a", host))
	f.edge.domains[host] = apiwire.Domain{Name: host, Verified: true}
	reconcileHost(t, f.reconciler())
	first := f.keys(t)[0]

	// Restart, no session on the key: it may never have reached the agent.
	reconcileHost(t, f.reconciler())
	keys := f.keys(t)
	if len(keys) != 1 || keys[0].ID == first.ID {
		t.Fatalf("keys %v: want one fresh key replacing %s", keys, first.ID)
	}
	second := keys[0]
	if s := f.secret(t); string(s.Data[keysecret.KeyKeyID]) != second.ID {
		t.Fatalf("Secret holds %s, want %s", s.Data[keysecret.KeyKeyID], second.ID)
	}

	// Restart with the agent connected on it: kept.
	f.edge.sessions[second.ID] = true
	reconcileHost(t, f.reconciler())
	if keys := f.keys(t); len(keys) != 1 || keys[0].ID != second.ID {
		t.Fatalf("keys %v: the live key %s must be kept", keys, second.ID)
	}

	// A stray key (a crash between issuing and handing over) is revoked.
	stray := f.edge.AddKey(map[string]string{edgeapi.LabelCluster: "c1", edgeapi.LabelKind: "Ingress", edgeapi.LabelHost: host})
	reconcileHost(t, f.reconciler())
	if f.edge.Has(stray) || !f.edge.Has(second.ID) {
		t.Errorf("stray %s must go, live %s stay", stray, second.ID)
	}
}

// A host that is not a reserved domain gets no key (an old one is
// revoked) and one RuleSkipped event per Ingress, not one per resync. A
// custom domain must be verified.
func TestUnreservedHost(t *testing.T) {
	f := newFixture(t, tunaIngress("team", "a", host))
	old := f.edge.AddKey(map[string]string{edgeapi.LabelCluster: "c1", edgeapi.LabelKind: "Ingress", edgeapi.LabelHost: host})
	r := f.reconciler()
	for range 3 {
		if res := reconcileHost(t, r); res.RequeueAfter <= 0 {
			t.Fatal("an unreserved host is re-checked: a reservation may be made by hand")
		}
	}
	if f.edge.Has(old) || len(f.keys(t)) != 0 {
		t.Error("no key for an unreserved host")
	}
	ev := f.drain()
	if len(ev) != 1 || !strings.Contains(ev[0], "RuleSkipped") || !strings.Contains(ev[0], "spec.subdomain: shop") {
		t.Fatalf("events %v: want one RuleSkipped saying how to reserve the host", ev)
	}

	f.edge.domains[host] = apiwire.Domain{Name: host, Custom: true, Verified: false}
	reconcileHost(t, r)
	if ev := f.drain(); len(ev) != 1 || !strings.Contains(ev[0], "not verified") {
		t.Fatalf("events %v: want one RuleSkipped about verification", ev)
	}
	f.edge.domains[host] = apiwire.Domain{Name: host, Custom: true, Verified: true,
		DNSRecords: []apiwire.DNSRecord{{Type: "CNAME", Name: host, Value: "edge.tuna.test"}}}
	reconcileHost(t, r)
	if s := f.secret(t); s == nil || string(s.Data[keysecret.KeyLBHostname]) != "edge.tuna.test" {
		t.Fatalf("a verified custom domain is published; its status hostname is the CNAME target, Secret %v", s)
	}
}

// A host no served Ingress names any more loses its key and Secret; an
// edge failure surfaces so that the queue retries.
func TestReleaseAndEdgeFailure(t *testing.T) {
	ing := tunaIngress("team", "a", host)
	f := newFixture(t, ing)
	f.edge.domains[host] = apiwire.Domain{Name: host, Verified: true}
	r := f.reconciler()
	reconcileHost(t, r)
	if f.secret(t) == nil {
		t.Fatal("no Secret")
	}
	if err := f.kube.Delete(context.Background(), ing); err != nil {
		t.Fatal(err)
	}
	f.edge.FailNext("RevokeTunnelKey", fake.APIError(http.StatusServiceUnavailable, "internal"))
	if _, err := r.Reconcile(context.Background(), pubhost.Request(host)); err == nil {
		t.Fatal("an edge failure must surface")
	}
	reconcileHost(t, r)
	if len(f.keys(t)) != 0 || f.secret(t) != nil {
		t.Error("the key and its Secret must go with the last Ingress of the host")
	}
}

// Rules without a host, wildcard hosts and a lone defaultBackend are
// reported once each; an Ingress of another class is not looked at.
func TestRuleProblems(t *testing.T) {
	ing := tunaIngress("team", "a", "")
	ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{Host: "*.example.com"})
	ing.Spec.DefaultBackend = &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web"}}
	other := tunaIngress("team", "b", "")
	nginx := "nginx"
	other.Spec.IngressClassName = &nginx
	f := newFixture(t, ing, other)
	r := f.reconciler()
	for range 2 {
		for _, name := range []string{"a", "b"} {
			if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team", Name: name}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	ev := strings.Join(f.drain(), "\n")
	for _, want := range []string{"rule 1 skipped: the rule has no host", "rule 2 skipped: wildcard host *.example.com", "defaultBackend is not published"} {
		if strings.Count(ev, want) != 1 {
			t.Errorf("want one event %q, got:\n%s", want, ev)
		}
	}
	if strings.Count(ev, "RuleSkipped") != 3 {
		t.Errorf("want exactly three events, got:\n%s", ev)
	}
}

// An edge API failure never cuts a published host: neither a transient
// one nor a refusal to look the domain up (the operator's key rotated,
// say) revokes the host's key or deletes its Secret. A refusal is told
// once, and the host is re-checked.
func TestEdgeFailureKeepsHostKey(t *testing.T) {
	f := newFixture(t, tunaIngress("team", "a", host))
	f.edge.domains[host] = apiwire.Domain{Name: host, Verified: true}
	r := f.reconciler()
	reconcileHost(t, r)
	live := f.keys(t)[0]
	f.edge.sessions[live.ID] = true

	f.edge.domainErrs = []error{fake.APIError(http.StatusServiceUnavailable, apiwire.CodeInternal)}
	if _, err := r.Reconcile(context.Background(), pubhost.Request(host)); err == nil {
		t.Error("a transient failure goes back to the workqueue for backoff")
	}
	f.edge.domainErrs = []error{
		fake.APIError(http.StatusUnauthorized, apiwire.CodeUnauthorized),
		fake.APIError(http.StatusUnauthorized, apiwire.CodeUnauthorized),
	}
	for range 2 {
		if res := reconcileHost(t, r); res.RequeueAfter <= 0 {
			t.Error("a refused lookup is re-checked: fixing the operator's key changes no Ingress")
		}
	}
	if keys := f.keys(t); len(keys) != 1 || keys[0].ID != live.ID || f.edge.Calls("RevokeTunnelKey") != 0 {
		t.Fatalf("keys %v after %d revocations: the live key %s must stay", keys, f.edge.Calls("RevokeTunnelKey"), live.ID)
	}
	if s := f.secret(t); s == nil || string(s.Data[keysecret.KeyKeyID]) != live.ID {
		t.Fatalf("Secret %v: the agent must keep the live key", s)
	}
	ev := f.drain()
	if len(ev) != 1 || !strings.Contains(ev[0], tunav1.ReasonAPIKeyInvalid) || !strings.Contains(ev[0], "its tunnel is kept") {
		t.Errorf("events %v: want one warning that says the key is refused and the tunnel kept", ev)
	}

	// A Domain whose Ready is Unknown (its own check hit the outage) still
	// counts as reserved; who owns the host is read from the edge, so the
	// outage backs off there, and the host's key stays as it is.
	d := &tunav1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "shop"},
		Status: tunav1.DomainStatus{FQDN: host, Conditions: []metav1.Condition{{Type: tunav1.ConditionReady, Status: metav1.ConditionUnknown, Reason: tunav1.ReasonEdgeUnreachable}}}}
	if err := f.kube.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	calls := f.edge.Calls("CreateTunnelKey")
	f.edge.domainErrs = []error{fake.APIError(http.StatusServiceUnavailable, apiwire.CodeInternal)}
	if _, err := r.Reconcile(context.Background(), pubhost.Request(host)); err == nil {
		t.Error("the owner lookup failed transiently: want the error back for backoff")
	}
	if keys := f.keys(t); len(keys) != 1 || keys[0].ID != live.ID || f.edge.Calls("CreateTunnelKey") != calls || f.edge.Calls("RevokeTunnelKey") != 0 {
		t.Errorf("keys %v: a Domain with Ready=Unknown keeps the host's key", keys)
	}
}

// A host's key is renewed once half of its TTL is gone, the host is looked
// at again when the next renewal is due, and a key that expired anyway
// (the controller was down) is replaced.
func TestKeyRenewedBeforeExpiry(t *testing.T) {
	f := newFixture(t, tunaIngress("team", "a", host))
	f.edge.domains[host] = apiwire.Domain{Name: host, Verified: true}
	f.edge.TTL = time.Hour
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.edge.SetNow(t0)
	r := f.reconciler()
	r.Now, r.Resync = f.edge.Now, 24*time.Hour // only renewals requeue sooner

	if res := reconcileHost(t, r); res.RequeueAfter != 30*time.Minute {
		t.Fatalf("after issuing: requeue in %v, want 30m (half the TTL)", res.RequeueAfter)
	}
	k := f.keys(t)[0]

	f.edge.SetNow(t0.Add(10 * time.Minute))
	if res := reconcileHost(t, r); res.RequeueAfter != 20*time.Minute || f.edge.Calls("RenewTunnelKey") != 0 {
		t.Fatalf("before half the TTL: requeue in %v after %d renewals, want 20m and none", res.RequeueAfter, f.edge.Calls("RenewTunnelKey"))
	}

	f.edge.SetNow(t0.Add(31 * time.Minute))
	if res := reconcileHost(t, r); res.RequeueAfter != 30*time.Minute {
		t.Fatalf("after renewing: requeue in %v, want 30m", res.RequeueAfter)
	}
	keys := f.keys(t)
	if f.edge.Calls("RenewTunnelKey") != 1 || len(keys) != 1 || keys[0].ID != k.ID ||
		!keys[0].ExpiresAt.Equal(t0.Add(31*time.Minute+time.Hour)) {
		t.Fatalf("keys %+v after %d renewals: want %s renewed once until %v", keys, f.edge.Calls("RenewTunnelKey"), k.ID, t0.Add(91*time.Minute))
	}

	f.edge.SetNow(t0.Add(5 * time.Hour)) // renewals missed: the key expired
	reconcileHost(t, r)
	keys = f.keys(t)
	if len(keys) != 1 || keys[0].ID == k.ID {
		t.Fatalf("keys %v: want one new key replacing the expired %s", keys, k.ID)
	}
	if s := f.secret(t); string(s.Data[keysecret.KeyKeyID]) != keys[0].ID {
		t.Fatalf("Secret holds %s, want the new key %s", s.Data[keysecret.KeyKeyID], keys[0].ID)
	}
}

// A renewal the edge cannot answer (5xx) keeps the host's key and Secret:
// the key is valid for up to another half TTL, so the host goes on
// serving while the renewal is retried with backoff, and the retry renews
// the same key.
func TestRenewalFailureKeepsHostKey(t *testing.T) {
	f := newFixture(t, tunaIngress("team", "a", host))
	f.edge.domains[host] = apiwire.Domain{Name: host, Verified: true}
	f.edge.TTL = time.Hour
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.edge.SetNow(t0)
	r := f.reconciler()
	r.Now = f.edge.Now
	reconcileHost(t, r)
	k := f.keys(t)[0]

	f.edge.SetNow(t0.Add(40 * time.Minute)) // due for renewal
	f.edge.FailNext("RenewTunnelKey", fake.APIError(http.StatusServiceUnavailable, apiwire.CodeInternal))
	if _, err := r.Reconcile(context.Background(), pubhost.Request(host)); err == nil {
		t.Error("a failed renewal goes back to the workqueue for backoff")
	}
	if keys := f.keys(t); len(keys) != 1 || keys[0].ID != k.ID || f.edge.Calls("RevokeTunnelKey") != 0 || f.edge.Calls("CreateTunnelKey") != 1 {
		t.Fatalf("keys %v after %d revocations: the key %s must stay", keys, f.edge.Calls("RevokeTunnelKey"), k.ID)
	}
	if s := f.secret(t); s == nil || string(s.Data[keysecret.KeyKeyID]) != k.ID {
		t.Fatalf("Secret %v: the agent must keep the key", s)
	}

	reconcileHost(t, r)
	if keys := f.keys(t); len(keys) != 1 || keys[0].ID != k.ID || !keys[0].ExpiresAt.Equal(t0.Add(100*time.Minute)) {
		t.Fatalf("keys %+v: want %s renewed until %v once the edge answers", keys, k.ID, t0.Add(100*time.Minute))
	}
}
