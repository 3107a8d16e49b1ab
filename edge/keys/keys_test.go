package keys

import "testing"

func TestParseRoundTrip(t *testing.T) {
	for _, s := range []string{"tuna_0123456789abcdef_abc", "tunt_fedcba9876543210_x2y"} {
		k, err := Parse(s)
		if err != nil || k.String() != s {
			t.Fatalf("Parse(%q) = %+v, %v", s, k, err)
		}
	}
	if k, _ := Parse("tunt_0123456789abcdef_abc"); k.Kind != KindTunnel || k.ID != "0123456789abcdef" || k.Secret != "abc" {
		t.Fatalf("parts: %+v", k)
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
