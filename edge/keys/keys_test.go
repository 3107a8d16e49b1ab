package keys

import (
	"strings"
	"testing"
)

func TestNewParseRoundTrip(t *testing.T) {
	for _, kind := range []Kind{KindAPI, KindTunnel} {
		k, err := New(kind)
		if err != nil {
			t.Fatal(err)
		}
		s := k.String()
		if !strings.HasPrefix(s, string(kind)+"_") || strings.Count(s, "_") != 2 {
			t.Fatalf("key %q has the wrong shape", s)
		}
		p, err := Parse(s)
		if err != nil || p != k {
			t.Fatalf("Parse(%q) = %+v, %v", s, p, err)
		}
		if !Matches(p, k.Hash()) {
			t.Fatal("key does not match its own hash")
		}
		other, _ := New(kind)
		if Matches(other, k.Hash()) || other.ID == k.ID {
			t.Fatal("two keys collide")
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, s := range []string{
		"", "tuna", "tuna__x", "tunx_0123456789abcdef_abc", "tuna_0123_abc",
		"tuna_0123456789abcdeg_abc", "tuna_0123456789abcdef_", "tuna_0123456789abcdef_a_b",
	} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) accepted", s)
		}
	}
}

func TestMatchesRejectsTamperedSecret(t *testing.T) {
	k, _ := New(KindTunnel)
	h := k.Hash()
	k.Secret += "x"
	if Matches(k, h) {
		t.Fatal("tampered key matched")
	}
}
