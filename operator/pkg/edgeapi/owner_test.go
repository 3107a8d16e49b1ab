package edgeapi_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
)

func TestOwnedMessage(t *testing.T) {
	const cluster = "c-1"
	owned := func(owner string) error {
		return fmt.Errorf("issuing: %w", &client.APIError{Status: 403, Code: client.CodeAddressOwned, Owner: owner, Address: "shop.tuna.localhost"})
	}
	cases := []struct {
		name string
		err  error
		ok   bool
		want []string
	}{
		{"namespace of this cluster", owned(edgeapi.Owner(cluster, "demo")), true,
			[]string{"shop.tuna.localhost", "namespace demo", "namespace attacker to spec.sharedWith"}},
		{"another cluster", owned("c-2/demo"), true, []string{"owner c-2/demo", "another cluster"}},
		{"a user's API key", owned("key:abc"), true, []string{"edge API key abc"}},
		{"another refusal", &client.APIError{Status: 409, Code: client.CodeNameTaken}, false, nil},
		{"no API error", errors.New("dial tcp: refused"), false, nil},
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
		})
	}
	if got := edgeapi.Owners(cluster, []string{"a", "b"}); len(got) != 2 || got[1] != "c-1/b" {
		t.Fatalf("Owners = %v", got)
	}
}
