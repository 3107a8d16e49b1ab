package keyhash

import (
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/keys"
)

func TestNewParseRoundTrip(t *testing.T) {
	for _, kind := range []keys.Kind{keys.KindAPI, keys.KindTunnel} {
		k, err := New(kind)
		if err != nil {
			t.Fatal(err)
		}
		s := k.String()
		if !strings.HasPrefix(s, string(kind)+"_") || strings.Count(s, "_") != 2 {
			t.Fatalf("key %q has the wrong shape", s)
		}
		p, err := keys.Parse(s)
		if err != nil || p != k {
			t.Fatalf("Parse(%q) = %+v, %v", s, p, err)
		}
		if !Matches(p, Of(k)) {
			t.Fatal("key does not match its own hash")
		}
		other, _ := New(kind)
		if Matches(other, Of(k)) || other.ID == k.ID {
			t.Fatal("two keys collide")
		}
	}
}

func TestMatchesRejectsTamperedSecret(t *testing.T) {
	k, _ := New(keys.KindTunnel)
	h := Of(k)
	k.Secret += "x"
	if Matches(k, h) {
		t.Fatal("tampered key matched")
	}
}

func TestRandomToken(t *testing.T) {
	a, b := RandomToken(8), RandomToken(8)
	if len(a) != 16 || a == b {
		t.Fatalf("tokens %q %q", a, b)
	}
}
