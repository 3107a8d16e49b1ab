package ingress

import (
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func class(name, controller string, isDefault bool) networkingv1.IngressClass {
	c := networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.IngressClassSpec{Controller: controller}}
	if isDefault {
		c.Annotations = map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}
	}
	return c
}

func ptr[T any](v T) *T { return &v }

func TestServes(t *testing.T) {
	withClass := func(n string) *networkingv1.Ingress {
		return &networkingv1.Ingress{Spec: networkingv1.IngressSpec{IngressClassName: ptr(n)}}
	}
	legacy := func(n string) *networkingv1.Ingress {
		return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationLegacyClass: n}}}
	}
	none := &networkingv1.Ingress{}
	deleting := withClass("tuna")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}

	ours := []networkingv1.IngressClass{class("tuna", ControllerName, false), class("nginx", "k8s.io/ingress-nginx", true)}
	oursDefault := []networkingv1.IngressClass{class("tuna", ControllerName, true), class("nginx", "k8s.io/ingress-nginx", false)}
	impostor := []networkingv1.IngressClass{class("tuna", "example.com/other", true)}

	cases := []struct {
		name    string
		classes []networkingv1.IngressClass
		ing     *networkingv1.Ingress
		want    bool
	}{
		{"class tuna", ours, withClass("tuna"), true},
		{"class nginx", ours, withClass("nginx"), false},
		{"no class, tuna not default", ours, none, false},
		{"no class, tuna default", oursDefault, none, true},
		{"class nginx while tuna default", oursDefault, withClass("nginx"), false},
		{"legacy annotation", ours, legacy("tuna"), true},
		{"legacy annotation other", oursDefault, legacy("nginx"), false},
		{"class named tuna of another controller", impostor, withClass("tuna"), false},
		{"no such class", nil, withClass("tuna"), false},
		{"being deleted", ours, deleting, false},
	}
	for _, tc := range cases {
		if got := NewClasses(tc.classes).Serves(tc.ing); got != tc.want {
			t.Errorf("%s: Serves = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !MayClaim(none, "tuna") || !MayClaim(withClass("tuna"), "tuna") || MayClaim(withClass("nginx"), "tuna") || MayClaim(legacy("nginx"), "tuna") {
		t.Error("MayClaim")
	}
}

func TestHosts(t *testing.T) {
	ing := &networkingv1.Ingress{Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{
		{Host: "b.example.com"}, {Host: ""}, {Host: "*.example.com"}, {Host: "a.example.com"}, {Host: "b.example.com"},
	}}}
	if got := strings.Join(Hosts(ing), ","); got != "a.example.com,b.example.com" {
		t.Fatalf("Hosts = %s", got)
	}
	for host, mentions := range map[string]string{"": "no host", "*.example.com": "wildcard"} {
		if p := HostProblem(host); !strings.Contains(p, mentions) {
			t.Errorf("HostProblem(%q) = %q, want it to mention %q", host, p, mentions)
		}
	}
	if p := HostProblem("a.example.com"); p != "" {
		t.Errorf("HostProblem(valid) = %q", p)
	}
}

type path struct {
	typ      networkingv1.PathType
	path     string
	svc      string
	portName string
}

func ing(ns, name string, created time.Time, host string, def string, paths ...path) *networkingv1.Ingress {
	i := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name),
		CreationTimestamp: metav1.Time{Time: created}}}
	var ps []networkingv1.HTTPIngressPath
	for _, p := range paths {
		port := networkingv1.ServiceBackendPort{Number: 80}
		if p.portName != "" {
			port = networkingv1.ServiceBackendPort{Name: p.portName}
		}
		ps = append(ps, networkingv1.HTTPIngressPath{Path: p.path, PathType: ptr(p.typ),
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: p.svc, Port: port}}})
	}
	i.Spec.Rules = []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: ps}}}}
	if def != "" {
		i.Spec.DefaultBackend = &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: def, Port: networkingv1.ServiceBackendPort{Number: 80}}}
	}
	return i
}

func patterns(h Host) []string {
	var out []string
	for _, r := range h.Routes {
		out = append(out, r.Pattern()+" "+r.Ingress.Name+" "+BackendString(r.Backend))
	}
	return out
}

func TestMerge(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pfx, exact, impl := networkingv1.PathTypePrefix, networkingv1.PathTypeExact, networkingv1.PathTypeImplementationSpecific
	older := ing("team", "zz-older", t0, "h.example", "web",
		path{pfx, "/", "web", ""}, path{pfx, "/api/", "api", ""}, path{exact, "/health", "health", ""})
	newer := ing("team", "aa-newer", t0.Add(time.Second), "h.example", "other",
		path{pfx, "/api", "api2", "http"}, path{exact, "/api", "exact-api", ""}, path{impl, "/blog", "blog", ""}, path{pfx, "/blog", "blog2", ""})
	otherHost := ing("team", "elsewhere", t0, "other.example", "", path{pfx, "/", "x", ""})

	// The order of the input does not matter.
	for _, in := range [][]*networkingv1.Ingress{{older, newer, otherHost}, {otherHost, newer, older}} {
		h := Merge("h.example", in)
		if len(h.Ingresses) != 2 || h.Ingresses[0] != older || h.Ingresses[1] != newer {
			t.Fatalf("Ingresses = %v, want older then newer", h.Ingresses)
		}
		want := []string{
			"Prefix / zz-older web:80",
			"Prefix /api zz-older api:80",
			"Exact /health zz-older health:80",
			"default zz-older web:80",
			"Exact /api aa-newer exact-api:80",
			"Prefix /blog aa-newer blog:80",
		}
		if got := patterns(h); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("routes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		var conflicts []string
		for _, c := range h.Conflicts {
			conflicts = append(conflicts, c.Route.Pattern()+" "+c.Route.Ingress.Name+" lost to "+c.Winner.Ingress.Name)
		}
		wantC := []string{
			"Prefix /api aa-newer lost to zz-older",
			"Prefix /blog aa-newer lost to aa-newer",
			"default aa-newer lost to zz-older",
		}
		if strings.Join(conflicts, "\n") != strings.Join(wantC, "\n") {
			t.Fatalf("conflicts:\n%s\nwant:\n%s", strings.Join(conflicts, "\n"), strings.Join(wantC, "\n"))
		}
		if msg := h.Conflicts[0].Message("h.example"); !strings.Contains(msg, "Ingress team/zz-older, which is older and wins") || !strings.Contains(msg, "api2:http") {
			t.Errorf("conflict message: %s", msg)
		}
		if msg := h.Conflicts[1].Message("h.example"); !strings.Contains(msg, "appears twice in this Ingress") {
			t.Errorf("duplicate message: %s", msg)
		}
	}
}

// Same creation second: the namespace/name order decides, whatever the
// input order.
func TestMergeTieBreak(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := ing("b-ns", "a", t0, "h.example", "", path{networkingv1.PathTypePrefix, "/", "a", ""})
	b := ing("a-ns", "z", t0, "h.example", "", path{networkingv1.PathTypePrefix, "/", "b", ""})
	for _, in := range [][]*networkingv1.Ingress{{a, b}, {b, a}} {
		h := Merge("h.example", in)
		if len(h.Routes) != 1 || h.Routes[0].Ingress != b {
			t.Fatalf("winner %v, want a-ns/z", patterns(h))
		}
	}
}

// Events about different subjects or with different messages get
// different actions (the events API merges events by action), within the
// API's 128 bytes.
func TestAction(t *testing.T) {
	long := strings.Repeat("very-long-label.", 15) + "example.com"
	seen := map[string]bool{}
	for _, a := range []string{
		Action("Route", "backend/"+long+"/Prefix /api", "msg"),
		Action("Route", "backend/"+long+"/Prefix /api", "other msg"),
		Action("Route", "backend/"+long+"/Prefix /apx", "msg"),
		Action("Publish", "rule/0", "msg"),
		Action("Publish", "rule/1", "msg"),
	} {
		if len(a) > 128 {
			t.Errorf("action %q is %d bytes", a, len(a))
		}
		if seen[a] {
			t.Errorf("duplicate action %q", a)
		}
		seen[a] = true
	}
	if first, again := Action("Publish", "rule/0", "m"), Action("Publish", "rule/0", "m"); first != again {
		t.Error("the same event must keep its action, so repeats form a series")
	}
}

func TestNotes(t *testing.T) {
	var n Notes
	a := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "a", UID: "1"}}
	if !n.Set(a, "x", "m") || n.Set(a, "x", "m") || !n.Set(a, "x", "m2") {
		t.Fatal("Set reports changes only")
	}
	n.Set(a, "backend/h/1", "m")
	n.Set(a, "backend/h/2", "m")
	n.Prune(a, "backend/h/", map[string]bool{"backend/h/2": true})
	if _, ok := n.Get(a, "backend/h/1"); ok {
		t.Error("pruned subject kept")
	}
	if _, ok := n.Get(a, "backend/h/2"); !ok {
		t.Error("kept subject pruned")
	}
	recreated := a.DeepCopy()
	recreated.UID = "2"
	if !n.Set(recreated, "x", "m2") {
		t.Error("a re-created Ingress starts afresh")
	}
	if !n.Clear(recreated, "x") || n.Clear(recreated, "x") {
		t.Error("Clear reports whether the subject was there")
	}
}
