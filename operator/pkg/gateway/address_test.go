package gateway

import (
	"maps"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// withAddress is res with a Gateway address for listeners without a
// hostname, HTTP on port 80 and HTTPS on 443.
func withAddress(addr string) Reservations {
	r := res
	r.Address = func(p gwv1.ProtocolType, port int32) Verdict {
		if (p == gwv1.HTTPProtocolType && port != 80) || (p == gwv1.HTTPSProtocolType && port != 443) {
			return Verdict{Message: "HTTP on port 80, HTTPS on 443 only"}
		}
		return Verdict{OK: true, Address: addr}
	}
	return r
}

func ipStatus(addrs ...string) gwv1.GatewayStatus {
	var s gwv1.GatewayStatus
	ip := gwv1.IPAddressType
	for _, a := range addrs {
		s.Addresses = append(s.Addresses, gwv1.GatewayStatusAddress{Type: &ip, Value: a})
	}
	return s
}

// An HTTP listener without a hostname is published on the Gateway's own
// address, which status.addresses lists first as an IPAddress, and so
// is an HTTPS one; a port the edge does not serve addresses on is
// refused.
func TestListenerWithoutHostname(t *testing.T) {
	gw := gateway(
		gwv1.Listener{Name: "web", Protocol: gwv1.HTTPProtocolType, Port: 80, Hostname: hostname("mine.example")},
		gwv1.Listener{Name: "any", Protocol: gwv1.HTTPProtocolType, Port: 80},
		gwv1.Listener{Name: "any-tls", Protocol: gwv1.HTTPSProtocolType, Port: 443},
		gwv1.Listener{Name: "any-8080", Protocol: gwv1.HTTPProtocolType, Port: 8080},
		gwv1.Listener{Name: "any-tls-80", Protocol: gwv1.HTTPSProtocolType, Port: 80},
	)
	ls := Evaluate(gw, withAddress("192.0.2.7"))
	want := map[string]string{"web": "True", "any": "True", "any-tls": "True", "any-8080": "False", "any-tls-80": "False"}
	for _, l := range ls {
		if a := status(t, l, "Accepted"); string(a.Status) != want[l.Name] || (a.Status == metav1.ConditionFalse && a.Reason != "UnsupportedValue") {
			t.Errorf("%s: Accepted %s/%s %q", l.Name, a.Status, a.Reason, a.Message)
		}
	}
	if !ls[1].AnyHost || ls[1].Host != "192.0.2.7" || !ls[2].AnyHost || ls[2].Host != "192.0.2.7" {
		t.Fatalf("listeners without hostname: %+v, %+v", ls[1], ls[2])
	}
	_, addrs := GatewayConditions(gw, ls, "")
	if len(addrs) != 2 || *addrs[0].Type != gwv1.IPAddressType || addrs[0].Value != "192.0.2.7" ||
		*addrs[1].Type != gwv1.HostnameAddressType || addrs[1].Value != "mine.example" {
		t.Fatalf("addresses %+v", addrs)
	}
	// Without an address from the edge the listener is refused, and says
	// what to do.
	ls = Evaluate(gw, res)
	if a := status(t, ls[1], "Accepted"); a.Status != metav1.ConditionFalse || a.Message == "" {
		t.Fatalf("no Gateway addresses: %+v", a)
	}
}

// Each Gateway that needs an address keeps the one its status holds while
// it is in the pool and no older Gateway holds it; the others take the
// free ones, oldest first, until none is left. A Gateway whose listeners
// all have hostnames only wants one: it keeps or takes one while some are
// free after those that need one, and gives its own up to one that needs
// it when none is.
func TestAssignAddresses(t *testing.T) {
	at := func(name string, sec int, s gwv1.GatewayStatus, ls ...gwv1.Listener) *gwv1.Gateway {
		return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name, CreationTimestamp: metav1.NewTime(time.Unix(int64(sec), 0))},
			Spec: gwv1.GatewaySpec{Listeners: ls}, Status: s}
	}
	any := gwv1.Listener{Name: "any", Protocol: gwv1.HTTPProtocolType, Port: 80}
	named := gwv1.Listener{Name: "web", Protocol: gwv1.HTTPProtocolType, Port: 80, Hostname: hostname("mine.example")}
	tcp := gwv1.Listener{Name: "tcp", Protocol: gwv1.TCPProtocolType, Port: 5432}
	gws := []*gwv1.Gateway{
		at("old", 1, gwv1.GatewayStatus{}, any),
		at("kept", 2, ipStatus("10.0.0.3"), any),
		at("named", 3, ipStatus("10.0.0.1"), named), // wants one: keeps it while there is room
		at("stale", 4, ipStatus("10.9.9.9"), any),   // not in the pool any more
		at("dup", 5, ipStatus("10.0.0.3"), any),     // an older one holds it
		at("late", 6, gwv1.GatewayStatus{}, any),
		at("named-new", 7, gwv1.GatewayStatus{}, named),
		at("tcp", 8, gwv1.GatewayStatus{}, tcp), // neither
	}
	key := func(n string) client.ObjectKey { return types.NamespacedName{Namespace: "a", Name: n} }
	for _, c := range []struct {
		pool []string
		want map[client.ObjectKey]string
	}{
		// Room for all: the named ones too.
		{[]string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"},
			map[client.ObjectKey]string{key("kept"): "10.0.0.3", key("named"): "10.0.0.1", key("old"): "10.0.0.2", key("stale"): "10.0.0.4",
				key("dup"): "10.0.0.5", key("late"): "10.0.0.6"}},
		// Four: those that need one first; dup takes named's.
		{[]string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"},
			map[client.ObjectKey]string{key("kept"): "10.0.0.3", key("old"): "10.0.0.2", key("stale"): "10.0.0.4", key("dup"): "10.0.0.1"}},
	} {
		got := AssignAddresses(gws, c.pool, nil)
		if len(got) != len(c.want) {
			t.Fatalf("pool %v: assigned %v, want %v", c.pool, got, c.want)
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("pool %v: %s: %q, want %q (all: %v)", c.pool, k, got[k], v, got)
			}
		}
	}
	if OwnAddress(gws[1]) != "10.0.0.3" || OwnAddress(gws[2]) != "10.0.0.1" || OwnAddress(at("t", 9, ipStatus("10.0.0.1"), tcp)) != "" {
		t.Fatalf("OwnAddress: %q %q", OwnAddress(gws[1]), OwnAddress(gws[2]))
	}
	if h := Hosts(gws[1]); len(h) != 1 || h[0] != "10.0.0.3" {
		t.Fatalf("Hosts of a Gateway with an address: %v", h)
	}
}

// Over reconciles, each writing the addresses it assigned into the
// Gateways' status as the controller does: a Gateway whose listeners all
// have hostnames is given a free address and keeps it from one reconcile
// to the next; a Gateway that needs one and finds none free takes it back,
// and the other does not take it again; it gets one again once one is
// free; one that its address would not serve (served) gives it up. No two
// Gateways ever share an address.
func TestAssignAddressesOverReconciles(t *testing.T) {
	at := func(name string, sec int, ls ...gwv1.Listener) *gwv1.Gateway {
		return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "gw", CreationTimestamp: metav1.NewTime(time.Unix(int64(sec), 0))},
			Spec: gwv1.GatewaySpec{Listeners: ls}}
	}
	any := gwv1.Listener{Name: "any", Protocol: gwv1.HTTPProtocolType, Port: 80}
	named := gwv1.Listener{Name: "web", Protocol: gwv1.HTTPProtocolType, Port: 80, Hostname: hostname("mine.example")}
	pool := []string{"10.0.0.1", "10.0.0.2"}
	hostnamed, first, second := at("hostnamed", 1, named), at("first", 2, any), at("second", 3, any)
	serves := map[*gwv1.Gateway]bool{hostnamed: true}
	served := func(gw *gwv1.Gateway) bool { return serves[gw] }
	// reconcile assigns twice, writing status in between, and returns the
	// first assignment once the second is the same.
	reconcile := func(gws ...*gwv1.Gateway) map[string]string {
		t.Helper()
		var rounds [2]map[string]string
		for i := range rounds {
			got := AssignAddresses(gws, pool, served)
			rounds[i] = map[string]string{}
			held := map[string]string{}
			for _, gw := range gws {
				a := got[client.ObjectKeyFromObject(gw)]
				gw.Status = ipStatus()
				if a != "" {
					gw.Status = ipStatus(a)
					rounds[i][gw.Namespace] = a
					if other, dup := held[a]; dup {
						t.Fatalf("%s and %s share %s", other, gw.Namespace, a)
					}
					held[a] = gw.Namespace
				}
			}
		}
		if !maps.Equal(rounds[0], rounds[1]) {
			t.Fatalf("not stable: %v, then %v", rounds[0], rounds[1])
		}
		return rounds[0]
	}
	want := func(step string, got map[string]string, w map[string]string) {
		t.Helper()
		if !maps.Equal(got, w) {
			t.Fatalf("%s: %v, want %v", step, got, w)
		}
	}
	want("given", reconcile(hostnamed, first), map[string]string{"first": "10.0.0.1", "hostnamed": "10.0.0.2"})
	want("taken back", reconcile(hostnamed, first, second), map[string]string{"first": "10.0.0.1", "second": "10.0.0.2"})
	want("free again", reconcile(hostnamed, second), map[string]string{"hostnamed": "10.0.0.1", "second": "10.0.0.2"})
	serves[hostnamed] = false
	want("not served", reconcile(hostnamed, second), map[string]string{"second": "10.0.0.2"})
}

// On a Gateway's address every route attaches whatever its hostnames, and
// its hostnames then select requests by their host: an exact hostname
// before a wildcard, a wildcard before a route without hostnames.
func TestRulesForAddress(t *testing.T) {
	gw := gateway(gwv1.Listener{Name: "any", Protocol: gwv1.HTTPProtocolType, Port: 80})
	gw.Status = ipStatus("192.0.2.7")
	listed := make([]gwv1.HTTPRoute, 0, 3)
	gws := Gateways{types.NamespacedName{Namespace: "a", Name: "gw"}: {Gateway: gw, Listeners: Evaluate(gw, withAddress("192.0.2.7"))}}
	route := func(name string, sec int, hosts ...gwv1.Hostname) *gwv1.HTTPRoute {
		return &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name, CreationTimestamp: metav1.NewTime(time.Unix(int64(sec), 0))},
			Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}}, Hostnames: hosts,
				Rules: []gwv1.HTTPRouteRule{{}}}}
	}
	routes := []*gwv1.HTTPRoute{route("plain", 1), route("wild", 2, "*.example.com"), route("exact", 3, "foo.example.com", "bar.example.org")}
	for _, rt := range routes {
		ps := Attach(RouteInfo{Kind: "HTTPRoute", Namespace: "a", Hostnames: rt.Spec.Hostnames, Parents: rt.Spec.ParentRefs}, gws)
		if len(ps) != 1 || !ps[0].Accepted || len(ps[0].Hosts) != 1 || ps[0].Hosts[0] != "192.0.2.7" {
			t.Fatalf("%s: %+v", rt.Name, ps)
		}
	}
	if !IsAddress("192.0.2.7") || IsAddress("mine.example") {
		t.Fatal("IsAddress")
	}
	for _, rt := range routes {
		listed = append(listed, *rt)
	}
	rules := RulesOfHost("192.0.2.7", []*gwv1.Gateway{gw}, listed, nil)
	if len(rules) != 4 {
		t.Fatalf("%d rules, want 4 (one per hostname)", len(rules))
	}
	var got []string
	for _, r := range rules {
		host := ""
		if r.Conditions != nil {
			host = r.Conditions.Host
		}
		got = append(got, r.Route.Name+" "+host)
	}
	want := []string{"plain ", "wild *.example.com", "exact foo.example.com", "exact bar.example.org"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("rules for the address: %q, want %q (the router orders them by host: agent/hosttunnel's tests)", got, want)
	}
}

// The controller writes a Gateway's own address into its status, which
// changes its hosts without a new generation: that event must get through.
func TestHostsChanged(t *testing.T) {
	any := gwv1.Listener{Name: "any", Protocol: gwv1.HTTPProtocolType, Port: 80}
	old := gateway(any)
	addressed := old.DeepCopy()
	addressed.Status = ipStatus("192.0.2.7")
	p := HostsChanged()
	if !p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: addressed}) {
		t.Fatal("a new own address was filtered out")
	}
	same := addressed.DeepCopy()
	same.Status.Conditions = []metav1.Condition{{Type: "Programmed"}}
	if p.Update(event.UpdateEvent{ObjectOld: addressed, ObjectNew: same}) {
		t.Fatal("a status change that keeps the hosts got through")
	}
	bumped := same.DeepCopy()
	bumped.Generation++
	if !p.Update(event.UpdateEvent{ObjectOld: same, ObjectNew: bumped}) {
		t.Fatal("a new generation was filtered out")
	}
}

// allowedRoutes.kinds naming a kind the listener does not take is
// ResolvedRefs=False InvalidRouteKinds even beside one it takes; the
// listener still serves that one, which supportedKinds lists.
func TestListenerWithSomeInvalidKinds(t *testing.T) {
	gw := gateway(gwv1.Listener{Name: "mixed", Protocol: gwv1.HTTPProtocolType, Port: 80, Hostname: hostname("mine.example"),
		AllowedRoutes: &gwv1.AllowedRoutes{Kinds: []gwv1.RouteGroupKind{{Kind: "InvalidRoute"}, {Kind: "HTTPRoute"}}}})
	l := Evaluate(gw, res)[0]
	if r := status(t, l, "ResolvedRefs"); r.Status != metav1.ConditionFalse || r.Reason != "InvalidRouteKinds" {
		t.Fatalf("ResolvedRefs %+v", r)
	}
	if !l.Accepted || len(l.Kinds) != 1 || l.Kinds[0].Kind != "HTTPRoute" || status(t, l, "Programmed").Status != metav1.ConditionTrue {
		t.Fatalf("listener %+v: want HTTPRoute served", l)
	}
}

// A Gateway with spec.addresses is not accepted (UnsupportedAddress), and
// nothing of it is published: no host, no address of its own, every
// listener refused, so that a Gateway not accepted serves nothing.
func TestGatewayWithStaticAddressesPublishesNothing(t *testing.T) {
	gw := gateway(
		gwv1.Listener{Name: "web", Protocol: gwv1.HTTPProtocolType, Port: 80, Hostname: hostname("mine.example")},
		gwv1.Listener{Name: "any", Protocol: gwv1.HTTPProtocolType, Port: 80},
	)
	ip := gwv1.IPAddressType
	gw.Spec.Addresses = []gwv1.GatewaySpecAddress{{Type: &ip, Value: "192.0.2.9"}}
	if h := Hosts(gw); len(h) != 0 || NeedsAddress(gw) {
		t.Fatalf("hosts %v, needs an address %v", h, NeedsAddress(gw))
	}
	ls := Evaluate(gw, withAddress("192.0.2.7"))
	for _, l := range ls {
		if l.Accepted || l.Programmed {
			t.Errorf("listener %s is accepted or programmed", l.Name)
		}
	}
	conds, addrs := GatewayConditions(gw, ls, "")
	if len(addrs) != 0 || conds[0].Status != metav1.ConditionFalse || conds[0].Reason != string(gwv1.GatewayReasonUnsupportedAddress) {
		t.Fatalf("Gateway status %+v, addresses %v", conds, addrs)
	}
}
