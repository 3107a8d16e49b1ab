package gateway

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

func ptr[T any](v T) *T { return &v }

func hostname(h string) *gwv1.Hostname { return ptr(gwv1.Hostname(h)) }

var res = Reservations{
	Host: func(h string) Verdict {
		switch h {
		case "mine.example", "also.example":
			return Verdict{OK: true, Address: h}
		case "theirs.example":
			return Verdict{Conflict: true, Message: "owned by b"}
		}
		return Verdict{Message: "not reserved"}
	},
	Port: func(p int32) Verdict {
		if p == 30001 {
			return Verdict{OK: true, Address: "edge.example:30001"}
		}
		return Verdict{Message: "not reserved"}
	},
}

func gateway(ls ...gwv1.Listener) *gwv1.Gateway {
	return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "gw", Generation: 3}, Spec: gwv1.GatewaySpec{GatewayClassName: "tuna", Listeners: ls}}
}

func status(t *testing.T, l Listener, typ string) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(l.Conditions, typ)
	if c == nil {
		t.Fatalf("listener %s has no %s condition", l.Name, typ)
	}
	return *c
}

// Each listener's conditions carry the spec's reason names.
func TestEvaluateListeners(t *testing.T) {
	gw := gateway(
		gwv1.Listener{Name: "web", Protocol: gwv1.HTTPProtocolType, Port: 80, Hostname: hostname("Mine.example")},
		gwv1.Listener{Name: "web-tls", Protocol: gwv1.HTTPSProtocolType, Port: 443, Hostname: hostname("mine.example")},
		gwv1.Listener{Name: "dup", Protocol: gwv1.HTTPProtocolType, Port: 8080, Hostname: hostname("mine.example")},
		gwv1.Listener{Name: "taken", Protocol: gwv1.HTTPProtocolType, Port: 80, Hostname: hostname("theirs.example")},
		gwv1.Listener{Name: "unreserved", Protocol: gwv1.HTTPProtocolType, Port: 80, Hostname: hostname("nobody.example")},
		gwv1.Listener{Name: "nohost", Protocol: gwv1.HTTPProtocolType, Port: 80},
		gwv1.Listener{Name: "wild", Protocol: gwv1.HTTPProtocolType, Port: 80, Hostname: hostname("*.example")},
		gwv1.Listener{Name: "tcp", Protocol: gwv1.TCPProtocolType, Port: 30001},
		gwv1.Listener{Name: "tcp-free", Protocol: gwv1.TCPProtocolType, Port: 30002},
		gwv1.Listener{Name: "udp", Protocol: gwv1.UDPProtocolType, Port: 53},
		gwv1.Listener{Name: "kinds", Protocol: gwv1.HTTPProtocolType, Port: 80, Hostname: hostname("also.example"),
			AllowedRoutes: &gwv1.AllowedRoutes{Kinds: []gwv1.RouteGroupKind{{Kind: "GRPCRoute"}}}},
	)
	ls := Evaluate(gw, res)
	want := map[string]struct {
		accepted, acceptedReason, conflicted, conflictReason, resolvedReason string
	}{
		"web":        {"True", "Accepted", "False", "NoConflicts", "ResolvedRefs"},
		"web-tls":    {"True", "Accepted", "False", "NoConflicts", "ResolvedRefs"},
		"dup":        {"False", "UnsupportedValue", "True", "HostnameConflict", "ResolvedRefs"},
		"taken":      {"False", "UnsupportedValue", "True", "HostnameConflict", "ResolvedRefs"},
		"unreserved": {"False", "UnsupportedValue", "False", "NoConflicts", "ResolvedRefs"},
		"nohost":     {"False", "UnsupportedValue", "False", "NoConflicts", "ResolvedRefs"},
		"wild":       {"False", "UnsupportedValue", "False", "NoConflicts", "ResolvedRefs"},
		"tcp":        {"True", "Accepted", "False", "NoConflicts", "ResolvedRefs"},
		"tcp-free":   {"False", "PortUnavailable", "False", "NoConflicts", "ResolvedRefs"},
		"udp":        {"False", "UnsupportedProtocol", "False", "NoConflicts", "ResolvedRefs"},
		"kinds":      {"True", "Accepted", "False", "NoConflicts", "InvalidRouteKinds"},
	}
	if len(ls) != len(want) {
		t.Fatalf("%d listeners, want %d", len(ls), len(want))
	}
	for _, l := range ls {
		w := want[l.Name]
		a, c, r, p := status(t, l, "Accepted"), status(t, l, "Conflicted"), status(t, l, "ResolvedRefs"), status(t, l, "Programmed")
		if string(a.Status) != w.accepted || a.Reason != w.acceptedReason || string(c.Status) != w.conflicted || c.Reason != w.conflictReason || r.Reason != w.resolvedReason {
			t.Errorf("%s: Accepted %s/%s Conflicted %s/%s ResolvedRefs %s, want %+v", l.Name, a.Status, a.Reason, c.Status, c.Reason, r.Reason, w)
		}
		if a.ObservedGeneration != 3 {
			t.Errorf("%s: observedGeneration %d", l.Name, a.ObservedGeneration)
		}
		wantProgrammed := w.accepted == "True" && w.resolvedReason == "ResolvedRefs"
		if l.Accepted != wantProgrammed || (p.Status == metav1.ConditionTrue) != wantProgrammed {
			t.Errorf("%s: Programmed %s, usable %v, want %v", l.Name, p.Status, l.Accepted, wantProgrammed)
		}
	}
	conds, addrs := GatewayConditions(gw, ls, "")
	if conds[0].Status != metav1.ConditionTrue || conds[0].Reason != "ListenersNotValid" || conds[1].Reason != "Programmed" {
		t.Fatalf("gateway conditions %+v", conds)
	}
	if len(addrs) != 2 || addrs[0].Value != "mine.example" || addrs[1].Value != "edge.example" {
		t.Fatalf("addresses %+v", addrs)
	}
	bad := gateway(gwv1.Listener{Name: "x", Protocol: gwv1.HTTPProtocolType, Port: 80, Hostname: hostname("nobody.example")})
	conds, addrs = GatewayConditions(bad, Evaluate(bad, res), "")
	if conds[0].Status != metav1.ConditionFalse || conds[0].Reason != "ListenersNotValid" || conds[1].Reason != "Invalid" || len(addrs) != 0 {
		t.Fatalf("all listeners invalid: %+v %+v", conds, addrs)
	}
}

func TestAttach(t *testing.T) {
	all := gwv1.NamespacesFromAll
	gw := gateway(
		gwv1.Listener{Name: "web", Protocol: gwv1.HTTPProtocolType, Port: 80, Hostname: hostname("mine.example")},
		gwv1.Listener{Name: "open", Protocol: gwv1.HTTPSProtocolType, Port: 443, Hostname: hostname("mine.example"),
			AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &all}}},
		gwv1.Listener{Name: "tcp", Protocol: gwv1.TCPProtocolType, Port: 30001},
	)
	gws := Gateways{types.NamespacedName{Namespace: "a", Name: "gw"}: {Gateway: gw, Listeners: Evaluate(gw, res)}}
	ref := func(ns, section string) gwv1.ParentReference {
		p := gwv1.ParentReference{Name: "gw"}
		if ns != "" {
			p.Namespace = ptr(gwv1.Namespace(ns))
		}
		if section != "" {
			p.SectionName = ptr(gwv1.SectionName(section))
		}
		return p
	}
	cases := []struct {
		name      string
		info      RouteInfo
		reason    gwv1.RouteConditionReason
		listeners int
	}{
		{"same namespace, both listeners", RouteInfo{Kind: "HTTPRoute", Namespace: "a", Parents: []gwv1.ParentReference{ref("", "")}}, gwv1.RouteReasonAccepted, 2},
		{"other namespace, open listener only", RouteInfo{Kind: "HTTPRoute", Namespace: "b", Parents: []gwv1.ParentReference{ref("a", "")}}, gwv1.RouteReasonAccepted, 1},
		{"other namespace, Same listener", RouteInfo{Kind: "HTTPRoute", Namespace: "b", Parents: []gwv1.ParentReference{ref("a", "web")}}, gwv1.RouteReasonNotAllowedByListeners, 0},
		{"no such section", RouteInfo{Kind: "HTTPRoute", Namespace: "a", Parents: []gwv1.ParentReference{ref("", "nope")}}, gwv1.RouteReasonNoMatchingParent, 0},
		{"hostname mismatch", RouteInfo{Kind: "HTTPRoute", Namespace: "a", Hostnames: []gwv1.Hostname{"other.example"}, Parents: []gwv1.ParentReference{ref("", "")}}, gwv1.RouteReasonNoMatchingListenerHostname, 0},
		{"wildcard hostname", RouteInfo{Kind: "HTTPRoute", Namespace: "a", Hostnames: []gwv1.Hostname{"*.example"}, Parents: []gwv1.ParentReference{ref("", "web")}}, gwv1.RouteReasonAccepted, 1},
		{"TCPRoute on the TCP listener", RouteInfo{Kind: "TCPRoute", Namespace: "a", Parents: []gwv1.ParentReference{ref("", "")}}, gwv1.RouteReasonAccepted, 1},
		{"HTTPRoute on the TCP listener", RouteInfo{Kind: "HTTPRoute", Namespace: "a", Parents: []gwv1.ParentReference{ref("", "tcp")}}, gwv1.RouteReasonNotAllowedByListeners, 0},
	}
	for _, c := range cases {
		ps := Attach(c.info, gws)
		if len(ps) != 1 || ps[0].Reason != c.reason || len(ps[0].Listeners) != c.listeners || ps[0].Accepted != (c.reason == gwv1.RouteReasonAccepted) {
			t.Errorf("%s: %+v, want %s on %d listeners", c.name, ps, c.reason, c.listeners)
		}
	}
	if ps := Attach(RouteInfo{Kind: "HTTPRoute", Namespace: "a", Parents: []gwv1.ParentReference{{Name: "not-ours"}}}, gws); len(ps) != 0 {
		t.Errorf("a parentRef to another controller's Gateway got status: %+v", ps)
	}
	sel := gwv1.NamespacesFromSelector
	gw.Spec.Listeners[0].AllowedRoutes = &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &sel, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}}}
	in := RouteInfo{Kind: "HTTPRoute", Namespace: "c", NamespaceLabels: labels.Set{"team": "x"}, Parents: []gwv1.ParentReference{ref("a", "web")}}
	if ps := Attach(in, gws); !ps[0].Accepted {
		t.Errorf("selector match refused: %+v", ps)
	}
	in.NamespaceLabels = labels.Set{"team": "y"}
	if ps := Attach(in, gws); ps[0].Accepted {
		t.Errorf("selector mismatch accepted: %+v", ps)
	}
}

func TestGranted(t *testing.T) {
	grants := []gwv1.ReferenceGrant{{ObjectMeta: metav1.ObjectMeta{Namespace: "backends"}, Spec: gwv1.ReferenceGrantSpec{
		From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "apps"}},
		To:   []gwv1.ReferenceGrantTo{{Group: "", Kind: "Service", Name: ptr(gwv1.ObjectName("api"))}},
	}}}
	cases := []struct {
		fromKind, fromNS, toNS, name string
		want                         bool
	}{
		{"HTTPRoute", "apps", "backends", "api", true},
		{"HTTPRoute", "apps", "backends", "db", false},
		{"HTTPRoute", "other", "backends", "api", false},
		{"TCPRoute", "apps", "backends", "api", false},
		{"HTTPRoute", "apps", "elsewhere", "api", false},
	}
	for _, c := range cases {
		if got := Granted(grants, c.fromKind, c.fromNS, c.toNS, c.name); got != c.want {
			t.Errorf("%+v: %v", c, got)
		}
	}
}

// Rules of two routes: the older route's rule wins a tie, and the
// conversion keeps each match's path type, method, headers and query.
func TestRules(t *testing.T) {
	exact := gwv1.PathMatchExact
	regex := gwv1.PathMatchRegularExpression
	older := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "z-old", CreationTimestamp: metav1.NewTime(time.Unix(100, 0))},
		Spec: gwv1.HTTPRouteSpec{Rules: []gwv1.HTTPRouteRule{{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Value: ptr("/api")}}}}}}}
	newer := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "a-new", CreationTimestamp: metav1.NewTime(time.Unix(200, 0))},
		Spec: gwv1.HTTPRouteSpec{Rules: []gwv1.HTTPRouteRule{
			{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Value: ptr("/api")}}}},
			{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: &exact, Value: ptr("/h")}, Method: ptr(gwv1.HTTPMethodPost),
				Headers: []gwv1.HTTPHeaderMatch{{Name: "X-A", Value: "1"}}, QueryParams: []gwv1.HTTPQueryParamMatch{{Name: "q", Value: "2"}}}}},
			{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: &regex, Value: ptr("/r.*")}}}},
			{Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestMirror}}},
		}}}
	rules := Rules([]*gwv1.HTTPRoute{newer, older})
	if len(rules) != 5 {
		t.Fatalf("%d rules", len(rules))
	}
	if rules[0].Route != older || rules[1].Route != newer || rules[0].Rank >= rules[1].Rank {
		t.Fatalf("the older route is not ranked first: %s %s", rules[0].Name(), rules[1].Name())
	}
	h := rules[2]
	if h.Type != pubhost.Exact || h.Path != "/h" || h.Conditions.Method != "POST" || len(h.Conditions.Headers) != 1 || len(h.Conditions.Query) != 1 || h.Problem != "" {
		t.Fatalf("rule 1 converted to %+v", h)
	}
	if rules[3].Problem == "" || rules[4].Problem == "" {
		t.Fatalf("unsupported match or filter not reported: %q %q", rules[3].Problem, rules[4].Problem)
	}
	if rules[4].Path != "/" || rules[4].Type != pubhost.Prefix {
		t.Fatalf("a rule without matches is not PathPrefix /: %+v", rules[4])
	}
}

func TestCoveringWildcards(t *testing.T) {
	for host, want := range map[string][]string{
		"a.b.example.com": {"*.b.example.com", "*.example.com"},
		"*.b.example.com": {"*.example.com"},
		"example.com":     nil,
		"*.example.com":   nil,
	} {
		if got := CoveringWildcards(host); !slices.Equal(got, want) {
			t.Errorf("CoveringWildcards(%q) = %q, want %q", host, got, want)
		}
	}
}
