package edgeapi_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
)

func TestOwnedMessage(t *testing.T) {
	const cluster = "c-1"
	owned := func(owner string, claim bool) error {
		return fmt.Errorf("issuing: %w", &apiwire.APIError{Status: 403, Code: apiwire.CodeAddressOwned, Owner: owner, Address: "shop.tuna.localhost", Claim: claim})
	}
	cases := []struct {
		name    string
		err     error
		ok      bool
		want    []string
		notWant []string
	}{
		{"a Domain of a namespace of this cluster", owned(edgeapi.Owner(cluster, "demo"), false), true,
			[]string{"shop.tuna.localhost belongs to namespace demo", "add namespace attacker to spec.sharedWith of its Domain"}, nil},
		// A claim has no Domain whose sharedWith could list anyone.
		{"a bare subdomain claimed by a namespace", owned(edgeapi.Owner(cluster, "demo"), true), true,
			[]string{"namespace demo, whose Tunnel or Ingress used this bare subdomain first", "free once that namespace's tunnels on it are gone",
				"namespace demo reserves it with a Domain that lists namespace attacker"},
			[]string{"ask its owner to add"}},
		{"another cluster", owned("c-2/demo", false), true,
			[]string{"belongs to owner c-2/demo on the edge, not to this cluster (id c-1): choose another address"},
			[]string{"sharedWith", "owners transfer"}},
		{"this namespace of another cluster id: a rebuild", owned("c-0/attacker", false), true,
			[]string{"if c-0 was this cluster's id before a rebuild", "tuna-edge owners transfer --from c-0 --to c-1", "clusterID=c-0"},
			[]string{"sharedWith"}},
		{"a user's API key", owned("key:abc", true), true, []string{"edge API key abc", "free once they stop"}, []string{"sharedWith"}},
		{"another refusal", &apiwire.APIError{Status: 409, Code: apiwire.CodeNameTaken}, false, nil, nil},
		{"no API error", errors.New("dial tcp: refused"), false, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg, ok := edgeapi.Owned(c.err, cluster, "attacker")
			if ok != c.ok {
				t.Fatalf("ok = %v, want %v", ok, c.ok)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
			for _, w := range c.notWant {
				if strings.Contains(msg, w) {
					t.Errorf("message %q names %q, which does not work here", msg, w)
				}
			}
		})
	}
	if got := edgeapi.Owners(cluster, []string{"a", "b"}); len(got) != 2 || got[1] != "c-1/b" {
		t.Fatalf("Owners = %v", got)
	}
}
