package names

import (
	"slices"
	"testing"
)

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"App.Tuna.Localhost:8080": "app.tuna.localhost",
		"example.com.":            "example.com",
		"[::1]:80":                "::1",
		"host":                    "host",
	} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckDomain(t *testing.T) {
	cases := []struct {
		in string
		ok bool
	}{
		{"example.com", true},
		{"a-b.example.com", true},
		{"example", false},
		{"-a.example.com", false},
		{"a_b.example.com", false},
		{"Example.com", false},
		{"a..com", false},
		{"xn--80ak6aa92e.com", true},
	}
	for _, c := range cases {
		if err := CheckDomain(c.in); (err == nil) != c.ok {
			t.Errorf("CheckDomain(%q) = %v, want ok=%v", c.in, err, c.ok)
		}
	}
}

func TestCheckAlias(t *testing.T) {
	for in, ok := range map[string]bool{"pg": true, "db-1": true, "5432": false, "": false, "a.b": false} {
		if err := CheckAlias(in); (err == nil) != ok {
			t.Errorf("CheckAlias(%q) = %v, want ok=%v", in, err, ok)
		}
	}
}

func TestSubdomainOf(t *testing.T) {
	if l, ok := SubdomainOf("app.tuna.localhost", "tuna.localhost"); !ok || l != "app" {
		t.Fatalf("got %q %v", l, ok)
	}
	if _, ok := SubdomainOf("a.b.tuna.localhost", "tuna.localhost"); ok {
		t.Fatal("two labels accepted")
	}
	if _, ok := SubdomainOf("tuna.localhost", "tuna.localhost"); ok {
		t.Fatal("base accepted")
	}
}

func TestCheckHostWildcards(t *testing.T) {
	for in, ok := range map[string]bool{
		"*.example.com":   true,
		"*.a.example.com": true,
		"example.com":     true,
		"*.com":           false, // a top-level domain's wildcard
		"*":               false,
		"a.*.example.com": false,
		"*.*.example.com": false,
		"**.example.com":  false,
		"*a.example.com":  false,
	} {
		if err := CheckHost(in); (err == nil) != ok {
			t.Errorf("CheckHost(%q) = %v, want ok=%v", in, err, ok)
		}
	}
}

func TestCovering(t *testing.T) {
	collect := func(host string) []string {
		var out []string
		Covering(host, func(w string) bool { out = append(out, w); return true })
		return out
	}
	for in, want := range map[string][]string{
		"a.b.example.com": {"*.b.example.com", "*.example.com"},
		"a.example.com":   {"*.example.com"},
		"example.com":     nil,
		"*.b.example.com": {"*.example.com"},
		"*.example.com":   nil,
		"192.0.2.7":       nil,
	} {
		if got := collect(in); !slices.Equal(got, want) {
			t.Errorf("Covering(%q) = %q, want %q", in, got, want)
		}
	}
	n := 0
	Covering("a.b.c.example.com", func(string) bool { n++; return false })
	if n != 1 {
		t.Errorf("Covering went on after fn returned false: %d calls", n)
	}
}
