package pubhost

import (
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestAccessInForce(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ing := func(ns, name string, age int, policy string) AccessClaim {
		return AccessClaim{Kind: "Ingress", Policy: policy, Obj: &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Second))}}}
	}
	route := func(ns, name string, age int, policy string) AccessClaim {
		return AccessClaim{Kind: "HTTPRoute", Policy: policy, Obj: &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Second))}}}
	}
	// want lists, oldest first, "ns/name" then "" (in force), or the
	// refusal's telling words, with "!" first when overridden.
	cases := []struct {
		name          string
		owner, domain string
		claims        []AccessClaim
		policy        string
		want          []string
	}{
		{name: "none", owner: "a"},
		{name: "owner's only", owner: "a", claims: []AccessClaim{ing("a", "web", 1, "p")}, policy: "p",
			want: []string{"a/web", ""}},
		{name: "a guest of a shared host is refused, whatever its age", owner: "a",
			claims: []AccessClaim{ing("a", "web", 2, "p"), ing("b", "guest", 1, "q")}, policy: "p",
			want: []string{"b/guest", "only the host's owner namespace a", "a/web", ""}},
		{name: "a guest alone guards nothing", owner: "a", claims: []AccessClaim{route("b", "guest", 1, "q")},
			want: []string{"b/guest", "only the host's owner namespace a"}},
		{name: "the oldest of the owner's wins, across kinds", owner: "a",
			claims: []AccessClaim{ing("a", "new", 3, "p"), route("a", "old", 1, "r"), ing("a", "same", 2, "r")}, policy: "r",
			want: []string{"a/old", "", "a/same", "", "a/new", "attaches r, which guards"}},
		{name: "no owner yet takes none", owner: "", claims: []AccessClaim{ing("a", "web", 1, "p")},
			want: []string{"a/web", "waiting for the controller"}},
		{name: "the Domain's policy wins over another", owner: "a", domain: "d",
			claims: []AccessClaim{ing("a", "web", 1, "p")}, policy: "p",
			want: []string{"a/web", "!the host's Domain attaches d"}},
		{name: "the Domain's own policy named again is in force", owner: "a", domain: "d",
			claims: []AccessClaim{ing("a", "web", 1, "d")}, policy: "d", want: []string{"a/web", ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			policy, verdicts := AccessInForce("app.example.com", c.owner, c.domain, c.claims)
			if policy != c.policy {
				t.Errorf("policy %q, want %q", policy, c.policy)
			}
			if len(verdicts)*2 != len(c.want) {
				t.Fatalf("%d verdicts %+v, want %v", len(verdicts), verdicts, c.want)
			}
			for i, v := range verdicts {
				key, want := c.want[2*i], c.want[2*i+1]
				if got := v.Obj.GetNamespace() + "/" + v.Obj.GetName(); got != key {
					t.Errorf("verdict %d is of %s, want %s", i, got, key)
				}
				overridden := strings.HasPrefix(want, "!")
				want = strings.TrimPrefix(want, "!")
				if v.Overridden != overridden || (want == "") != (v.Refusal == "") || !strings.Contains(v.Refusal, want) {
					t.Errorf("verdict of %s: refusal %q overridden %v, want %q overridden %v", key, v.Refusal, v.Overridden, want, overridden)
				}
			}
		})
	}
}
