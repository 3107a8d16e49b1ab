package e2e

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// basicUser is the credentials of the policy guardPolicy makes (u:pw).
const basicUser = "Basic dTpwdw=="

// guardPolicy creates, in ns, the htpasswd Secret users and the basic
// auth AccessPolicy name that admits u:pw.
func guardPolicy(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	require.NoError(t, err)
	require.NoError(t, env.CP.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-users"},
		StringData: map[string]string{"htpasswd": "u:" + string(hash)}}))
	require.NoError(t, env.CP.Client.Create(ctx, &tunav1.AccessPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: tunav1.AccessPolicySpec{Rules: []tunav1.AccessRule{
			{BasicAuth: &tunav1.BasicAuthRule{SecretRef: tunav1.SecretKeySelector{Name: name + "-users"}}}}}}))
}

// openPolicy creates, in ns, the AccessPolicy name that lets everyone in.
func openPolicy(t *testing.T, ns, name string) {
	t.Helper()
	require.NoError(t, env.CP.Client.Create(context.Background(), &tunav1.AccessPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: tunav1.AccessPolicySpec{Rules: []tunav1.AccessRule{{Public: true}}}}))
}

// waitGuarded waits until url asks for the password of guardPolicy, then
// checks that the password lets a request through to the backend want,
// which learns the user and never the password.
func waitGuarded(t *testing.T, url, want string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := get(t, url)
		assert.Equal(c, http.StatusUnauthorized, code, "no credentials: %s", body)
	}, wait, 100*time.Millisecond, "%s never asked for a password", url)
	code, body := get(t, url, "Authorization", "Basic dTp3cm9uZw==") // u:wrong
	assert.Equal(t, http.StatusUnauthorized, code, "a wrong password: %s", body)
	e := getEcho(t, url, "Authorization", basicUser, "X-Tuna-User", "admin")
	assert.Equal(t, want, e.Backend)
	assert.Equal(t, []string{"u"}, e.Header["X-Tuna-User"], "the edge's identity, not the client's")
	assert.Empty(t, e.Header["Authorization"], "the password stays at the edge")
}

// waitProtects waits until the policy is Accepted and lists the address
// of the object kind/name.
func waitProtects(t *testing.T, ns, policy string, addr tunav1.ProtectedAddress) {
	t.Helper()
	waitProtectsWithin(t, wait, ns, policy, addr)
}

// waitProtectsWithin is waitProtects with a time limit of its own: under
// the policy's resync (30 s), so that only the wake of the object that
// names the policy can meet it.
func waitProtectsWithin(t *testing.T, within time.Duration, ns, policy string, addr tunav1.ProtectedAddress) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var p tunav1.AccessPolicy
		require.NoError(c, env.CP.Client.Get(context.Background(), key(ns, policy), &p))
		cond := status.Find(p.Status.Conditions, tunav1.ConditionAccepted)
		require.NotNil(c, cond)
		assert.Equal(c, metav1.ConditionTrue, cond.Status, "%s: %s", cond.Reason, cond.Message)
		assert.True(c, slices.Contains(p.Status.Addresses, addr), "addresses %+v, want %+v", p.Status.Addresses, addr)
	}, within, 100*time.Millisecond)
}

// waitAttachmentRefused waits until the policy, which the edge has, is
// not Accepted because nothing that attaches it puts it in force
// (AttachmentRefused, the message mentioning each of mentions), and lists
// no address; the object kind/name that attaches it (name "": none to
// check) was never told the policy is in force.
func waitAttachmentRefused(t *testing.T, ns, policy, kind, name string, mentions ...string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var p tunav1.AccessPolicy
		require.NoError(c, env.CP.Client.Get(context.Background(), key(ns, policy), &p))
		cond := status.Find(p.Status.Conditions, tunav1.ConditionAccepted)
		require.NotNil(c, cond)
		assert.Equal(c, metav1.ConditionFalse, cond.Status, "%s: %s", cond.Reason, cond.Message)
		assert.Equal(c, tunav1.ReasonAttachmentRefused, cond.Reason, cond.Message)
		for _, m := range mentions {
			assert.Contains(c, cond.Message, m)
		}
		assert.Empty(c, p.Status.Addresses, "the addresses the policy guards")
	}, wait, 100*time.Millisecond)
	if name == "" {
		return
	}
	assert.Zero(t, eventsOf(t, ns, kind, name, "")["AccessPolicyInForce"], "%s %s/%s is told policy %s is in force", kind, ns, name, policy)
}

func extensionRef(policy string) gwv1.HTTPRouteFilter {
	return gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterExtensionRef, ExtensionRef: &gwv1.LocalObjectReference{
		Group: gateway.AccessPolicyGroup, Kind: gateway.AccessPolicyKind, Name: gwv1.ObjectName(policy)}}
}

// An HTTPRoute attaches its namespace's AccessPolicy with an ExtensionRef
// filter: the edge asks for the password before a request enters the
// cluster, and the policy lists the route's host. A route of a namespace
// the host is shared with, on the same Gateway, cannot put its own policy
// on the owner's host: its path stays behind the owner's policy and the
// route gets AccessPolicyRefused.
func TestAccessPolicyOnHTTPRoute(t *testing.T) {
	ctx := context.Background()
	ensureGatewayClass(t)
	owner, guest := namespace(t), namespace(t)
	echoService(t, owner, "web", harness.ServicePort{Name: "http", Port: 8080})
	echoService(t, guest, "shop", harness.ServicePort{Name: "http", Port: 8080})
	d := domain(owner, "gw", subdomainFor(owner, "gw"), "")
	d.Spec.SharedWith = []string{guest}
	require.NoError(t, env.CP.Client.Create(ctx, d))
	host := waitDomain(t, owner, "gw", metav1.ConditionTrue, tunav1.ReasonReserved).Status.FQDN
	guardPolicy(t, owner, "guard")
	openPolicy(t, guest, "open")

	gw := httpGateway(owner, "gw", host)
	gw.Spec.Listeners[0].AllowedRoutes = &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr(gwv1.NamespacesFromAll)}}
	require.NoError(t, env.CP.Client.Create(ctx, gw))
	parent := gwv1.ParentReference{Name: "gw", Namespace: ptr(gwv1.Namespace(owner))}
	require.NoError(t, env.CP.Client.Create(ctx, &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: owner, Name: "site"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{parent}},
		Hostnames:       []gwv1.Hostname{gwv1.Hostname(host)},
		Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "web", 8080, 1)},
			Filters: []gwv1.HTTPRouteFilter{extensionRef("guard")}}},
	}}))
	require.NoError(t, env.CP.Client.Create(ctx, &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: guest, Name: "grab"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{parent}},
		Rules: []gwv1.HTTPRouteRule{{Matches: []gwv1.HTTPRouteMatch{pathPrefix("/shop")},
			BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "shop", 8080, 1)}, Filters: []gwv1.HTTPRouteFilter{extensionRef("open")}}},
	}}))
	waitRoute(t, key(owner, "site"), "Accepted", "ResolvedRefs")
	waitRoute(t, key(guest, "grab"), "Accepted", "ResolvedRefs")

	waitGuarded(t, hostURL(host)+"/", "web-8080")
	// The policy was reconciled before the route existed: the route's
	// creation wakes it (its resync is 30 s).
	waitProtectsWithin(t, 15*time.Second, owner, "guard", tunav1.ProtectedAddress{Kind: "HTTPRoute", Name: "site", Address: host})
	waitGuarded(t, hostURL(host)+"/shop", "shop-8080")
	note := eventNote(t, guest, "HTTPRoute", "grab", "AccessPolicyRefused")
	assert.Contains(t, note, "access policy open")
	assert.Contains(t, note, "only the host's owner namespace "+owner)
	waitAttachmentRefused(t, guest, "open", "HTTPRoute", "grab", "HTTPRoute grab", "only the host's owner namespace "+owner)
}

// A LoadBalancer Service's HTTP port takes its namespace's AccessPolicy
// from the annotation k8s.tuna.am/access-policy: the edge asks for the
// password, the port's Tunnel names the policy, and the policy lists the
// Service and the Tunnel's address. A Service of a namespace a Domain is
// shared with may publish on it, but not under its own policy: the edge
// refuses that bind (AddressOwned), and the host never serves that
// Service.
func TestAccessPolicyOnLoadBalancerService(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	guardPolicy(t, ns, "guard")
	web := func(ns, name string, annotations map[string]string) *corev1.Service {
		svc := lbService(ns, name, tunav1.LoadBalancerClass, corev1.ServicePort{Name: "web", Port: 80, TargetPort: intstr.FromInt32(80),
			Protocol: corev1.ProtocolTCP, AppProtocol: ptr("http")})
		svc.Annotations = annotations
		require.NoError(t, env.CP.Client.Create(ctx, svc))
		b, err := harness.ServeEcho(ns+"-"+name, svc.Spec.ClusterIP, 80)
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		return svc
	}
	web(ns, "app", map[string]string{tunav1.AnnotationAccessPolicy: "guard"})
	host := ns + "-app." + harness.BaseDomain
	tun := waitReady(t, key(ns, "app-80"), metav1.ConditionTrue, tunav1.ReasonConnected)
	require.NotNil(t, tun.Spec.AccessPolicyRef)
	assert.Equal(t, "guard", tun.Spec.AccessPolicyRef.Name)
	waitGuarded(t, hostURL(host)+"/", ns+"-app")
	waitProtects(t, ns, "guard", tunav1.ProtectedAddress{Kind: "Tunnel", Name: "app-80", Address: strings.TrimPrefix(tun.Status.URL, "http://")})
	waitProtects(t, ns, "guard", tunav1.ProtectedAddress{Kind: "Service", Name: "app"})

	// Another namespace's Domain, shared with this one.
	owner := namespace(t)
	d := domain(owner, "site", subdomainFor(owner, "site"), "")
	d.Spec.SharedWith = []string{ns}
	require.NoError(t, env.CP.Client.Create(ctx, d))
	shared := waitDomain(t, owner, "site", metav1.ConditionTrue, tunav1.ReasonReserved).Status.FQDN
	openPolicy(t, ns, "open")
	web(ns, "grab", map[string]string{tunav1.AnnotationAccessPolicy: "open", tunav1.AnnotationSubdomain: subdomainFor(owner, "site")})
	refused := waitReady(t, key(ns, "grab-80"), metav1.ConditionFalse, tunav1.ReasonAddressOwned)
	assert.Contains(t, readyMessage(refused.Status.Conditions), "only its owner may put an access policy on it")
	code, body := get(t, hostURL(shared)+"/")
	assert.NotEqual(t, http.StatusOK, code, "the shared host serves the Service under a policy of its own: %s", body)
	assert.NotContains(t, string(body), ns+"-grab")
}
