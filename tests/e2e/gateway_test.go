package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/gatewayclass"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// ensureGatewayClass creates the GatewayClass tuna, as the chart does with
// gatewayClass.enabled, and waits until the controller accepts it.
func ensureGatewayClass(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	gc := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: gatewayclass.ClassName}, Spec: gwv1.GatewayClassSpec{ControllerName: gatewayclass.ControllerName}}
	if err := env.CP.Client.Create(ctx, gc); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.CP.Client.Get(ctx, types.NamespacedName{Name: gatewayclass.ClassName}, gc))
		cond := meta.FindStatusCondition(gc.Status.Conditions, "Accepted")
		require.NotNil(c, cond)
		require.Equal(c, []any{metav1.ConditionTrue, "Accepted"}, []any{cond.Status, cond.Reason})
	}, wait, 50*time.Millisecond, "GatewayClass tuna never Accepted")
}

func httpGateway(ns, name string, hosts ...string) *gwv1.Gateway {
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: gwv1.GatewaySpec{GatewayClassName: gatewayclass.ClassName}}
	for i, h := range hosts {
		gw.Spec.Listeners = append(gw.Spec.Listeners, gwv1.Listener{Name: gwv1.SectionName(fmt.Sprintf("web-%d", i)),
			Protocol: gwv1.HTTPProtocolType, Port: 80, Hostname: ptr(gwv1.Hostname(h))})
	}
	return gw
}

// waitGateway waits until the Gateway's condition typ has status and
// reason for its current generation.
func waitGateway(t *testing.T, k types.NamespacedName, typ string, want metav1.ConditionStatus, reason string) *gwv1.Gateway {
	t.Helper()
	var gw gwv1.Gateway
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.CP.Client.Get(context.Background(), k, &gw))
		cond := meta.FindStatusCondition(gw.Status.Conditions, typ)
		require.NotNil(c, cond, "no %s condition yet", typ)
		require.Equal(c, []any{want, reason, gw.Generation}, []any{cond.Status, cond.Reason, cond.ObservedGeneration}, "%s: %s", typ, cond.Message)
	}, wait, 50*time.Millisecond, "Gateway %s never %s=%s %s", k, typ, want, reason)
	return &gw
}

// waitRoute waits until the HTTPRoute's status for its parent Gateway has
// the given Accepted and ResolvedRefs reasons, and returns that status.
func waitRoute(t *testing.T, k types.NamespacedName, accepted, resolved string) gwv1.RouteParentStatus {
	t.Helper()
	var out gwv1.RouteParentStatus
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var rt gwv1.HTTPRoute
		require.NoError(c, env.CP.Client.Get(context.Background(), k, &rt))
		require.Len(c, rt.Status.Parents, 1)
		p := rt.Status.Parents[0]
		a := meta.FindStatusCondition(p.Conditions, "Accepted")
		r := meta.FindStatusCondition(p.Conditions, "ResolvedRefs")
		require.NotNil(c, a)
		require.NotNil(c, r)
		require.Equal(c, []any{accepted, resolved, rt.Generation, rt.Generation}, []any{a.Reason, r.Reason, a.ObservedGeneration, r.ObservedGeneration},
			"Accepted: %s; ResolvedRefs: %s", a.Message, r.Message)
		out = p
	}, wait, 50*time.Millisecond, "HTTPRoute %s never Accepted %s / ResolvedRefs %s", k, accepted, resolved)
	return out
}

func backendRef(ns, svc string, port int32, weight int32) gwv1.HTTPBackendRef {
	b := gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(svc), Port: ptr(gwv1.PortNumber(port))}, Weight: &weight}}
	if ns != "" {
		b.Namespace = ptr(gwv1.Namespace(ns))
	}
	return b
}

func pathPrefix(p string) gwv1.HTTPRouteMatch {
	return gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr(p)}}
}

// An HTTPRoute on a Gateway listener of a reserved host: weighted split,
// path, header and query matches and every supported filter, checked on
// real requests through the edge, and the status field by field.
func TestGatewayHTTPRoute(t *testing.T) {
	ctx := context.Background()
	ensureGatewayClass(t)
	ns := namespace(t)
	host := reserve(t, ns, "gw")
	echoService(t, ns, "a", harness.ServicePort{Name: "http", Port: 8080})
	echoService(t, ns, "b", harness.ServicePort{Name: "http", Port: 8080})
	gw := httpGateway(ns, "gw", host)
	require.NoError(t, env.CP.Client.Create(ctx, gw))

	exact := gwv1.PathMatchExact
	rt := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
		Rules: []gwv1.HTTPRouteRule{
			{Matches: []gwv1.HTTPRouteMatch{pathPrefix("/split")}, BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "a", 8080, 80), backendRef("", "b", 8080, 20)}},
			{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: &exact, Value: ptr("/match")}, Headers: []gwv1.HTTPHeaderMatch{{Name: "X-Env", Value: "canary"}}}},
				BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "b", 8080, 1)}},
			{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: &exact, Value: ptr("/match")}, QueryParams: []gwv1.HTTPQueryParamMatch{{Name: "v", Value: "2"}}}},
				BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "b", 8080, 1)}},
			{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: &exact, Value: ptr("/match")}}}, BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "a", 8080, 1)}},
			{Matches: []gwv1.HTTPRouteMatch{pathPrefix("/headers")}, BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "a", 8080, 1)},
				Filters: []gwv1.HTTPRouteFilter{
					{Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gwv1.HTTPHeaderFilter{
						Set: []gwv1.HTTPHeader{{Name: "X-Set", Value: "set"}}, Add: []gwv1.HTTPHeader{{Name: "X-Added", Value: "added"}}, Remove: []string{"X-Remove"}}},
					{Type: gwv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: &gwv1.HTTPHeaderFilter{
						Add: []gwv1.HTTPHeader{{Name: "X-Response", Value: "yes"}}}},
				}},
			{Matches: []gwv1.HTTPRouteMatch{pathPrefix("/old")}, Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestRedirect,
				RequestRedirect: &gwv1.HTTPRequestRedirectFilter{Scheme: ptr("https"), StatusCode: ptr(301),
					Path: &gwv1.HTTPPathModifier{Type: gwv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr("/new")}}}}},
			{Matches: []gwv1.HTTPRouteMatch{pathPrefix("/v1")}, BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "b", 8080, 1)},
				Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterURLRewrite, URLRewrite: &gwv1.HTTPURLRewriteFilter{
					Hostname: ptr(gwv1.PreciseHostname("internal.example")),
					Path:     &gwv1.HTTPPathModifier{Type: gwv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr("/v2")}}}}},
		},
	}}
	require.NoError(t, env.CP.Client.Create(ctx, rt))

	// Status, field by field.
	p := waitRoute(t, key(ns, "web"), "Accepted", "ResolvedRefs")
	assert.Equal(t, gatewayclass.ControllerName, p.ControllerName)
	assert.Equal(t, gwv1.ObjectName("gw"), p.ParentRef.Name)
	for _, c := range p.Conditions {
		assert.Equal(t, metav1.ConditionTrue, c.Status, "%s: %s", c.Type, c.Message)
	}
	got := waitGateway(t, key(ns, "gw"), "Programmed", metav1.ConditionTrue, "Programmed")
	a := meta.FindStatusCondition(got.Status.Conditions, "Accepted")
	require.NotNil(t, a)
	assert.Equal(t, []any{metav1.ConditionTrue, "Accepted"}, []any{a.Status, a.Reason})
	require.Len(t, got.Status.Addresses, 1)
	assert.Equal(t, host, got.Status.Addresses[0].Value)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.CP.Client.Get(ctx, key(ns, "gw"), got))
		require.Len(c, got.Status.Listeners, 1)
		l := got.Status.Listeners[0]
		require.Equal(c, int32(1), l.AttachedRoutes)
		for typ, reason := range map[string]string{"Accepted": "Accepted", "Programmed": "Programmed", "ResolvedRefs": "ResolvedRefs"} {
			cond := meta.FindStatusCondition(l.Conditions, typ)
			require.NotNil(c, cond, typ)
			require.Equal(c, []any{metav1.ConditionTrue, reason}, []any{cond.Status, cond.Reason}, typ)
		}
		cond := meta.FindStatusCondition(l.Conditions, "Conflicted")
		require.NotNil(c, cond)
		require.Equal(c, []any{metav1.ConditionFalse, "NoConflicts"}, []any{cond.Status, cond.Reason})
		require.Equal(c, gwv1.Kind("HTTPRoute"), l.SupportedKinds[0].Kind)
	}, wait, 50*time.Millisecond)

	base := "http://" + host
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, _ := get(t, base+"/match")
		require.Equal(c, http.StatusOK, code)
	}, wait, 50*time.Millisecond, "the host never served")

	// Matches.
	assert.Equal(t, "a-8080", getEcho(t, base+"/match").Backend)
	assert.Equal(t, "b-8080", getEcho(t, base+"/match", "X-Env", "canary").Backend, "header match")
	assert.Equal(t, "b-8080", getEcho(t, base+"/match?v=2").Backend, "query match")
	assert.Equal(t, "a-8080", getEcho(t, base+"/match?v=3").Backend, "query value mismatch")
	code, _ := get(t, base+"/match/deeper")
	assert.Equal(t, http.StatusNotFound, code, "Exact must not match a longer path")

	// Filters.
	e := getEcho(t, base+"/headers/x", "X-Set", "client", "X-Remove", "gone")
	assert.Equal(t, []string{"set"}, e.Header["X-Set"])
	assert.Equal(t, []string{"added"}, e.Header["X-Added"])
	assert.NotContains(t, e.Header, "X-Remove")
	req, err := http.NewRequest(http.MethodGet, base+"/headers/x", nil)
	require.NoError(t, err)
	resp, err := publicClient().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, "yes", resp.Header.Get("X-Response"))
	noFollow := publicClient()
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err = noFollow.Get(base + "/old/page?x=1")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMovedPermanently, resp.StatusCode)
	assert.Equal(t, "https://"+host+"/new/page?x=1", resp.Header.Get("Location"))
	e = getEcho(t, base+"/v1/items")
	assert.Equal(t, "b-8080", e.Backend)
	assert.Equal(t, "/v2/items", e.Path)
	assert.Equal(t, "internal.example", e.Host)

	// Weighted split: 80/20 over 500 requests, within ±5 points.
	counts := map[string]int{}
	for range 500 {
		counts[getEcho(t, base+"/split").Backend]++
	}
	assert.InDelta(t, 400, counts["a-8080"], 25, "backend a got %d of 500", counts["a-8080"])
	assert.InDelta(t, 100, counts["b-8080"], 25, "backend b got %d of 500", counts["b-8080"])
	assert.Equal(t, 500, counts["a-8080"]+counts["b-8080"])
	t.Logf("80/20 split over 500 requests: a=%d b=%d", counts["a-8080"], counts["b-8080"])
}

// A backendRef to another namespace is refused (ResolvedRefs=False
// RefNotPermitted, the request answers 500) until that namespace grants
// it with a ReferenceGrant; then it is served.
func TestGatewayCrossNamespaceBackend(t *testing.T) {
	ctx := context.Background()
	ensureGatewayClass(t)
	ns := namespace(t)
	other := namespace(t)
	host := reserve(t, ns, "gw")
	echoService(t, other, "shared", harness.ServicePort{Name: "http", Port: 8080})
	require.NoError(t, env.CP.Client.Create(ctx, httpGateway(ns, "gw", host)))
	rt := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cross"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
		Rules:           []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{backendRef(other, "shared", 8080, 1)}}},
	}}
	require.NoError(t, env.CP.Client.Create(ctx, rt))
	waitRoute(t, key(ns, "cross"), "Accepted", "RefNotPermitted")
	waitGateway(t, key(ns, "gw"), "Programmed", metav1.ConditionTrue, "Programmed")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, _ := get(t, "http://"+host+"/")
		require.Equal(c, http.StatusInternalServerError, code)
	}, wait, 50*time.Millisecond, "a refused backendRef must answer 500")

	grant := &gwv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "from-" + ns}, Spec: gwv1.ReferenceGrantSpec{
		From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: gwv1.Namespace(ns)}},
		To:   []gwv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
	}}
	require.NoError(t, env.CP.Client.Create(ctx, grant))
	waitRoute(t, key(ns, "cross"), "Accepted", "ResolvedRefs")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := get(t, "http://"+host+"/")
		require.Equal(c, http.StatusOK, code, "body %s", body)
		require.Contains(c, string(body), `"backend":"shared-8080"`)
	}, wait, 50*time.Millisecond, "the granted backend is never served")
}

// A Gateway may not take a host another namespace reserved: its listener
// is refused with Conflicted=True HostnameConflict, its route is accepted
// nowhere (though the listener counts it in attachedRoutes), and the host
// keeps serving its owner's route only.
func TestGatewayRefusesAnotherNamespacesHost(t *testing.T) {
	ctx := context.Background()
	ensureGatewayClass(t)
	owner := namespace(t)
	intruder := namespace(t)
	host := reserve(t, owner, "owned")
	route := func(ns, svc string) *gwv1.HTTPRoute {
		return &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
			Rules:           []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", svc, 8080, 1)}}},
		}}
	}
	echoService(t, owner, "mine", harness.ServicePort{Name: "http", Port: 8080})
	echoService(t, intruder, "theirs", harness.ServicePort{Name: "http", Port: 8080})
	require.NoError(t, env.CP.Client.Create(ctx, httpGateway(owner, "gw", host)))
	require.NoError(t, env.CP.Client.Create(ctx, route(owner, "mine")))
	require.NoError(t, env.CP.Client.Create(ctx, httpGateway(intruder, "gw", host)))
	require.NoError(t, env.CP.Client.Create(ctx, route(intruder, "theirs")))

	gw := waitGateway(t, key(intruder, "gw"), "Accepted", metav1.ConditionFalse, "ListenersNotValid")
	// The intruder's route attaches on the reconcile after its creation,
	// which may come after the one that refused the listener.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.CP.Client.Get(ctx, key(intruder, "gw"), gw))
		require.Len(c, gw.Status.Listeners, 1)
		assert.Equal(c, int32(1), gw.Status.Listeners[0].AttachedRoutes)
	}, wait, 50*time.Millisecond, "the intruder's listener never counted its route")
	p := meta.FindStatusCondition(gw.Status.Conditions, "Programmed")
	require.NotNil(t, p)
	assert.Equal(t, []any{metav1.ConditionFalse, "Invalid"}, []any{p.Status, p.Reason})
	assert.Empty(t, gw.Status.Addresses)
	require.Len(t, gw.Status.Listeners, 1)
	l := gw.Status.Listeners[0]
	c := meta.FindStatusCondition(l.Conditions, "Conflicted")
	require.NotNil(t, c)
	assert.Equal(t, []any{metav1.ConditionTrue, "HostnameConflict"}, []any{c.Status, c.Reason})
	assert.Contains(t, c.Message, "belongs to namespace "+owner)
	acc := meta.FindStatusCondition(l.Conditions, "Accepted")
	require.NotNil(t, acc)
	assert.Equal(t, metav1.ConditionFalse, acc.Status)
	// attachedRoutes counts the routes the listener selects, accepted or
	// not (the spec: "MUST be set for Listeners with condition Accepted:
	// false"); the route itself is not accepted.
	assert.Equal(t, int32(1), l.AttachedRoutes)
	waitRoute(t, key(intruder, "web"), "NotAllowedByListeners", "ResolvedRefs")

	// The owner's Gateway is programmed and its route alone is served.
	waitGateway(t, key(owner, "gw"), "Programmed", metav1.ConditionTrue, "Programmed")
	waitRoute(t, key(owner, "web"), "Accepted", "ResolvedRefs")
	waitBackend(t, "http://"+host+"/", "mine-8080")
	for range 20 {
		assert.Equal(t, "mine-8080", getEcho(t, "http://"+host+"/").Backend)
	}
}
