package gateway

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The hosts a route serves through a listener are the Gateway API's
// intersection of the listener's hostname and the route's hostnames.
func TestIntersection(t *testing.T) {
	for _, c := range []struct {
		listener string
		route    []gwv1.Hostname
		want     string
	}{
		{"", nil, ""},
		{"", []gwv1.Hostname{"A.example", "*.b.example"}, "a.example,*.b.example"},
		{"second.example", nil, "second.example"},
		{"Second.Example", []gwv1.Hostname{"second.example"}, "second.example"},
		{"second.example", []gwv1.Hostname{"*.example", "other.example"}, "second.example"},
		{"second.example", []gwv1.Hostname{"other.example"}, ""},
		{"second.example", []gwv1.Hostname{"*.second.example"}, ""}, // below it, not it
		{"second.example", []gwv1.Hostname{"second.example", "*.example"}, "second.example"},
		// Wildcard listeners (not published yet) intersect the same way.
		{"*.example", []gwv1.Hostname{"a.example", "*.b.example", "*.example", "c.other"}, "a.example,*.b.example,*.example"},
		{"*.b.example", []gwv1.Hostname{"*.example"}, "*.b.example"},
	} {
		if got := strings.Join(Intersection(c.listener, c.route), ","); got != c.want {
			t.Errorf("Intersection(%q, %v) = %q, want %q", c.listener, c.route, got, c.want)
		}
	}
}

// withListenerStatus is gw as the controller writes it: each named
// listener Accepted=True for generation gen.
func withListenerStatus(gw *gwv1.Gateway, gen int64, accepted ...string) *gwv1.Gateway {
	gw = gw.DeepCopy()
	for _, name := range accepted {
		gw.Status.Listeners = append(gw.Status.Listeners, gwv1.ListenerStatus{Name: gwv1.SectionName(name),
			Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: gen}}})
	}
	return gw
}

func httpRoute(ns, name string, sec int, parent gwv1.ParentReference, hostnames ...gwv1.Hostname) gwv1.HTTPRoute {
	return gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(time.Unix(int64(sec), 0))},
		Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{parent}}, Hostnames: hostnames,
			Rules: []gwv1.HTTPRouteRule{{}}}}
}

// table lists "route host" for each rule of the address's table.
func table(rules []Rule) string {
	var out []string
	for _, r := range rules {
		host := "*"
		if r.Conditions != nil && r.Conditions.Host != "" {
			host = r.Conditions.Host
		}
		out = append(out, r.Route.Name+" "+host)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// A Gateway's address serves the routes of its listeners with a hostname
// too, each for that hostname, while its status says the listener is
// accepted for its current generation: a listener the controller has not
// accepted (a hostname another namespace holds) adds nothing.
func TestAddressServesHostnamedListeners(t *testing.T) {
	gw := gateway(
		gwv1.Listener{Name: "any", Protocol: gwv1.HTTPSProtocolType, Port: 443},
		gwv1.Listener{Name: "second", Protocol: gwv1.HTTPSProtocolType, Port: 443, Hostname: hostname("second.example")},
		gwv1.Listener{Name: "tcp", Protocol: gwv1.TCPProtocolType, Port: 9000},
	)
	gw.Status = ipStatus("192.0.2.7")
	routes := []gwv1.HTTPRoute{
		httpRoute("a", "plain", 1, gwv1.ParentReference{Name: "gw"}, "example.org"),
		httpRoute("a", "second", 2, gwv1.ParentReference{Name: "gw", SectionName: ptr(gwv1.SectionName("second"))}),
	}
	for _, c := range []struct {
		name string
		gw   *gwv1.Gateway
		want string
	}{
		{"no listener status yet", gw, "plain example.org"},
		{"accepted for an older generation", withListenerStatus(gw, gw.Generation-1, "any", "second"), "plain example.org"},
		{"accepted", withListenerStatus(gw, gw.Generation, "any", "second", "tcp"), "plain example.org,second second.example"},
	} {
		if got := table(RulesOfHost("192.0.2.7", []*gwv1.Gateway{c.gw}, routes, nil)); got != c.want {
			t.Errorf("%s: table %q, want %q", c.name, got, c.want)
		}
	}
	// The listener's own host serves its routes without a host condition,
	// whatever the status (its key is the proof there).
	if got := table(RulesOfHost("second.example", []*gwv1.Gateway{gw}, routes, nil)); got != "second *" {
		t.Errorf("host second.example: table %q", got)
	}
}

// An address serves the routes of one Gateway: the oldest whose status
// holds it. A younger Gateway whose status names the address too (stale,
// or written by hand), of the namespace or another, adds nothing, nor does
// a Gateway of another address.
func TestAddressServesOneGateway(t *testing.T) {
	mk := func(ns, name string, sec int, addr string) *gwv1.Gateway {
		gw := gateway(
			gwv1.Listener{Name: "any", Protocol: gwv1.HTTPProtocolType, Port: 80},
			gwv1.Listener{Name: "named", Protocol: gwv1.HTTPProtocolType, Port: 80, Hostname: hostname("shared.example")})
		gw.Namespace, gw.Name, gw.CreationTimestamp = ns, name, metav1.NewTime(time.Unix(int64(sec), 0))
		gw.Status = ipStatus(addr)
		return withListenerStatus(gw, gw.Generation, "any", "named")
	}
	holder, younger, neighbour, elsewhere := mk("a", "holder", 1, "192.0.2.7"), mk("a", "younger", 2, "192.0.2.7"),
		mk("b", "neighbour", 3, "192.0.2.7"), mk("a", "elsewhere", 0, "192.0.2.8")
	var routes []gwv1.HTTPRoute
	for i, gw := range []*gwv1.Gateway{holder, younger, neighbour, elsewhere} {
		ref := gwv1.ParentReference{Name: gwv1.ObjectName(gw.Name), Namespace: ptr(gwv1.Namespace(gw.Namespace))}
		routes = append(routes, httpRoute(gw.Namespace, "to-"+gw.Name, 10+i, ref))
	}
	for _, order := range [][]*gwv1.Gateway{{elsewhere, holder, younger, neighbour}, {holder, neighbour}} {
		if got := AddressHolder("192.0.2.7", order); got != holder {
			t.Fatalf("AddressHolder = %v, want the oldest whose status holds the address", got.Name)
		}
		if got, want := table(RulesOfHost("192.0.2.7", order, routes, nil)), "to-holder *,to-holder shared.example"; got != want {
			t.Errorf("table %q, want %q", got, want)
		}
	}
	if AddressHolder("192.0.2.9", []*gwv1.Gateway{holder}) != nil || len(RulesOfHost("192.0.2.9", []*gwv1.Gateway{holder}, routes, nil)) != 0 {
		t.Fatal("an address no Gateway holds serves routes")
	}
}

// The controller accepting a listener in status changes what the address
// answers for without a new generation: that event must get through.
func TestHostsChangedOnListenerAcceptance(t *testing.T) {
	gw := gateway(gwv1.Listener{Name: "any", Protocol: gwv1.HTTPProtocolType, Port: 80},
		gwv1.Listener{Name: "named", Protocol: gwv1.HTTPProtocolType, Port: 80, Hostname: hostname("second.example")})
	gw.Status = ipStatus("192.0.2.7")
	before := withListenerStatus(gw, gw.Generation, "any")
	after := withListenerStatus(gw, gw.Generation, "any", "named")
	p := HostsChanged()
	if !p.Update(event.UpdateEvent{ObjectOld: before, ObjectNew: after}) || !p.Update(event.UpdateEvent{ObjectOld: after, ObjectNew: before}) {
		t.Fatal("a listener accepted or refused in status was filtered out")
	}
	if p.Update(event.UpdateEvent{ObjectOld: after, ObjectNew: after.DeepCopy()}) {
		t.Fatal("an update that keeps the accepted listeners got through")
	}
}

// A wildcard listener the edge does not publish as a host (here: not
// reserved) is accepted only where it is served: on the Gateway's own
// address (a listener without a hostname gives it one), on the port the
// edge serves its scheme there; its routes serve the hosts under the
// wildcard there, and it publishes no host of its own.
func TestWildcardListenerOnTheAddressOnly(t *testing.T) {
	wild := gwv1.Listener{Name: "wild", Protocol: gwv1.HTTPSProtocolType, Port: 443, Hostname: hostname("*.wildcard.example")}
	wrongPort := gwv1.Listener{Name: "wild-8443", Protocol: gwv1.HTTPSProtocolType, Port: 8443, Hostname: hostname("*.other.example")}
	any := gwv1.Listener{Name: "any", Protocol: gwv1.HTTPSProtocolType, Port: 443}

	alone := Evaluate(gateway(wild), withAddress("192.0.2.7"))
	if a := status(t, alone[0], "Accepted"); a.Status != metav1.ConditionFalse || !strings.Contains(a.Message, "add a listener without a hostname") {
		t.Fatalf("a wildcard listener without an address: %+v", a)
	}
	gw := gateway(any, wild, wrongPort)
	gw.Status = ipStatus("192.0.2.7")
	ls := Evaluate(gw, withAddress("192.0.2.7"))
	if a := status(t, ls[1], "Accepted"); a.Status != metav1.ConditionTrue || ls[1].Host != "" || ls[1].Address != "" {
		t.Fatalf("a wildcard listener beside one without a hostname: %+v, %+v", a, ls[1])
	}
	if a := status(t, ls[2], "Accepted"); a.Status != metav1.ConditionFalse || !strings.Contains(a.Message, "port") {
		t.Fatalf("a wildcard listener on a port the address is not served on: %+v", a)
	}
	// Its hostname is still one of the Gateway's hosts: the key
	// reconciler asks the edge, which takes no key for a wildcard that
	// is not reserved.
	if h := Hosts(gw); !slices.Equal(h, []string{"*.other.example", "*.wildcard.example", "192.0.2.7"}) {
		t.Fatalf("hosts %v", h)
	}
	_, addrs := GatewayConditions(gw, ls, "")
	if len(addrs) != 1 || addrs[0].Value != "192.0.2.7" {
		t.Fatalf("addresses %+v", addrs)
	}
	routes := []gwv1.HTTPRoute{
		httpRoute("a", "under", 1, gwv1.ParentReference{Name: "gw", SectionName: ptr(gwv1.SectionName("wild"))}, "a.wildcard.example", "b.elsewhere.example"),
		httpRoute("a", "outside", 2, gwv1.ParentReference{Name: "gw", SectionName: ptr(gwv1.SectionName("wild"))}, "b.elsewhere.example"),
	}
	got := table(RulesOfHost("192.0.2.7", []*gwv1.Gateway{withListenerStatus(gw, gw.Generation, "any", "wild")}, routes, nil))
	if got != "under a.wildcard.example" {
		t.Fatalf("table %q, want the route's hostname under the wildcard only", got)
	}
}
