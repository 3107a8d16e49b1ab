package hosttunnel

import (
	"net/http/httptest"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/router"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
)

// A rule's filters become handlers in front of its weighted backends.
func TestRuleHandler(t *testing.T) {
	r := gateway.Rule{Path: "/old", Filters: []gwv1.HTTPRouteFilter{
		{Type: gwv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gwv1.HTTPRequestRedirectFilter{Scheme: ptr("https"), StatusCode: ptr(301),
			Path: &gwv1.HTTPPathModifier{Type: gwv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr("/new")}}},
	}}
	w := httptest.NewRecorder()
	ruleHandler(r, nil).ServeHTTP(w, httptest.NewRequest("GET", "http://h.example/old/x", nil))
	if w.Code != 301 || w.Header().Get("Location") != "https://h.example/new/x" {
		t.Fatalf("redirect: %d %s", w.Code, w.Header().Get("Location"))
	}
}

// Two HTTPRoutes with the same match: the router serves the older one's,
// by the rank the rules carry.
func TestRulesTieGoesToTheOlderRoute(t *testing.T) {
	match := []gwv1.HTTPRouteRule{{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Value: ptr("/api")}}}}}
	older := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "z-old", CreationTimestamp: metav1.NewTime(time.Unix(100, 0))},
		Spec: gwv1.HTTPRouteSpec{Rules: match}}
	newer := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "a-new", CreationTimestamp: metav1.NewTime(time.Unix(200, 0))},
		Spec: gwv1.HTTPRouteSpec{Rules: match}}
	var routes []router.Route
	for _, r := range gateway.Rules([]*gwv1.HTTPRoute{newer, older}) {
		routes = append(routes, router.Route{Type: r.Type, Path: r.Path, Conditions: r.Conditions, Rank: r.Rank, Name: r.Name()})
	}
	tbl := router.NewTable(routes, nil)
	req := httptest.NewRequest("GET", "/api/x", nil)
	if got := tbl.MatchRequest(req, "/api/x"); got == nil || got.Name != "HTTPRoute a/z-old rule 0" {
		t.Fatalf("tie went to %v, want the older route", got)
	}
}

// On a Gateway's address, a route's hostnames select the requests by their
// host: an exact hostname before a wildcard, a wildcard before a route
// without hostnames.
func TestAddressRulesByHost(t *testing.T) {
	route := func(name string, sec int, hosts ...gwv1.Hostname) *gwv1.HTTPRoute {
		return &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name, CreationTimestamp: metav1.NewTime(time.Unix(int64(sec), 0))},
			Spec: gwv1.HTTPRouteSpec{Hostnames: hosts, Rules: []gwv1.HTTPRouteRule{{}}}}
	}
	routes := []*gwv1.HTTPRoute{route("plain", 1), route("wild", 2, "*.example.com"), route("exact", 3, "foo.example.com", "bar.example.org")}
	var onAddress []gateway.AddressRoute
	for _, rt := range routes { // attached to a listener without a hostname
		onAddress = append(onAddress, gateway.AddressRoute{Route: rt, Hosts: gateway.Intersection("", rt.Spec.Hostnames)})
	}
	var rs []router.Route
	for _, r := range gateway.AddressRules(onAddress) {
		rs = append(rs, router.Route{Type: r.Type, Path: r.Path, Name: r.Route.Name, Conditions: r.Conditions, Rank: r.Rank})
	}
	table := router.NewTable(rs, nil)
	for host, want := range map[string]string{
		"foo.example.com": "exact", "bar.example.org:80": "exact", "x.example.com": "wild", "example.com": "plain", "192.0.2.7": "plain",
	} {
		req := httptest.NewRequest("GET", "http://"+host+"/", nil)
		if got := table.MatchRequest(req, "/"); got == nil || got.Name != want {
			t.Errorf("%s: served by %v, want %s", host, got, want)
		}
	}
}
