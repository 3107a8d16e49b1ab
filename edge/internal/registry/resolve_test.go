package registry

import "testing"

// A request falls back to the most specific wildcard only when nobody holds
// a more specific name: a held name without a live route answers offline,
// whoever holds the wildcard.
func TestResolveFallsBackToWildcardsOnlyPastUnheldNames(t *testing.T) {
	r := New()
	wild := &sess{id: "w", key: "kw", reg: r}
	deep := &sess{id: "d", key: "kd", reg: r}
	exact := &sess{id: "e", key: "ke", reg: r}
	for _, s := range []*sess{wild, deep, exact} {
		r.Add(s, true)
	}
	for s, host := range map[*sess]string{wild: "*.example.com", deep: "*.b.example.com", exact: "live.example.com"} {
		if err := bindHTTP(r, s, host); err != nil {
			t.Fatal(err)
		}
	}
	// held: names with a reservation or a tunnel key; "offline.example.com"
	// and "*.gone.example.com" have no live tunnel.
	heldNames := map[string]bool{"offline.example.com": true, "*.gone.example.com": true,
		"live.example.com": true, "*.example.com": true, "*.b.example.com": true}
	held := func(n string) bool { return heldNames[n] }
	for _, c := range []struct {
		host, route, offline string
	}{
		{"live.example.com", "live.example.com", ""},
		{"x.example.com", "*.example.com", ""},
		{"x.y.example.com", "*.example.com", ""}, // any depth
		{"x.b.example.com", "*.b.example.com", ""},
		{"x.y.b.example.com", "*.b.example.com", ""},
		{"b.example.com", "*.example.com", ""},
		{"example.com", "", ""}, // a wildcard does not cover its parent
		{"other.org", "", ""},
		// Held, not connected: never the wildcard.
		{"offline.example.com", "", "offline.example.com"},
		{"x.gone.example.com", "", "*.gone.example.com"},
		{"192.0.2.7", "", ""},
	} {
		rt, off := r.Resolve(c.host, held)
		got := ""
		if rt != nil {
			got = rt.Host
		}
		if got != c.route || off != c.offline {
			t.Errorf("Resolve(%q) = %q, offline %q; want %q, offline %q", c.host, got, off, c.route, c.offline)
		}
	}
	// The exact holder's tunnel ends: its host answers offline, not the wildcard.
	r.Remove(exact.id)
	if rt, off := r.Resolve("live.example.com", held); rt != nil || off != "live.example.com" {
		t.Fatalf("after the exact holder left: route %v, offline %q; want offline", rt, off)
	}
}
