package certs

import (
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
)

// TestOwnersWildcardCertificateCoversOnlyTheirNames: an owner's stored
// "*.parent" certificate is served for the names under it that nobody
// holds and for those its owner holds, never for a name another owner
// holds, whether the wildcard comes from the store or from memory: that
// name gets its own certificate, else the default.
func TestOwnersWildcardCertificateCoversOnlyTheirNames(t *testing.T) {
	st, _ := openStore(t)
	ca := newTestCA(t)
	def := ca.certificate(t, "default.example", "")
	// Claims as the API makes them: the first owner of a key for a name
	// (c/b's names first: under c/a's wildcard they would be refused).
	for i, c := range []struct{ host, owner string }{
		{"b.wild.example", "c/b"},
		{"own.wild.example", "c/b"},
		{"*.wild.example", "c/a"},
		{"a.wild.example", "c/a"},
	} {
		k := store.TunnelKey{ID: fmt.Sprintf("tk_%d", i), Protocol: "http", Address: c.host, Owner: c.owner, CreatedAt: time.Now()}
		if err := st.IssueTunnelKey(k, true); err != nil {
			t.Fatal(err)
		}
	}
	seal := testSealer(t)
	newManager := func() *Manager {
		m, err := New(Config{Store: st, Seal: seal, Default: &def})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := newManager()
	chain, key, _ := ca.issue(t, "*.wild.example", "", time.Now().Add(time.Hour))
	if err := m.PutOwned("*.wild.example", "c/a", chain, key); err != nil {
		t.Fatal(err)
	}
	chain, key, _ = ca.issue(t, "own.wild.example", "", time.Now().Add(time.Hour))
	if err := m.PutOwned("own.wild.example", "c/b", chain, key); err != nil {
		t.Fatal(err)
	}
	served := func(m *Manager, host string) string {
		t.Helper()
		c, err := m.GetCertificate(&tls.ClientHelloInfo{ServerName: host, SupportedProtos: []string{"h2"}})
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		return c.Leaf.Subject.CommonName
	}
	// From the store: a fresh manager whose first handshake is the other
	// owner's name.
	if got := served(newManager(), "b.wild.example"); got != "default.example" {
		t.Fatalf("b.wild.example (held by c/b), wildcard from the store: served %s, want the default", got)
	}
	// From memory: the wildcard cached by a name it covers first.
	for _, c := range []struct{ host, want string }{
		{"x.wild.example", "*.wild.example"}, // nobody holds it
		{"a.wild.example", "*.wild.example"}, // its owner holds it
		{"b.wild.example", "default.example"},
		{"own.wild.example", "own.wild.example"},
		{"x.b.wild.example", "default.example"}, // a certificate's wildcard covers one label
	} {
		if got := served(m, c.host); got != c.want {
			t.Errorf("%s: served %s, want %s", c.host, got, c.want)
		}
	}
	// The name changes hands: c/b's key goes, c/a's wildcard covers it
	// again (re-checked at each handshake of a name somebody may hold).
	if _, err := st.RevokeTunnelKey("tk_0"); err != nil {
		t.Fatal(err)
	}
	if got := served(newManager(), "b.wild.example"); got != "*.wild.example" {
		t.Fatalf("b.wild.example released: served %s, want the wildcard", got)
	}
}
