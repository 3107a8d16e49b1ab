package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
)

// A wildcard host "*.parent" serves the names under parent, any depth,
// that nobody holds; a name another owner holds stays that owner's, and
// while its tunnel is down it answers "not connected", never through the
// wildcard. A wildcard keeps the names under it from other owners.
func TestWildcardHostServesOnlyNamesNobodyElseHolds(t *testing.T) {
	defCert, defKey, _ := writeWildcardCert(t, t.TempDir())
	e := startEdge(t, t.TempDir(), func(c *server.Config) {
		c.AnyHost = true
		c.HTTPSListen = "127.0.0.1:0"
		c.TLSCertFile, c.TLSKeyFile = defCert, defKey
	})
	ctx := context.Background()
	c := e.client(e.writeKey)

	// ownerA holds shop.example.net, then ownerB claims a wildcard over it.
	ka := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "shop.example.net", Owner: ownerA})
	sa := e.mustDial(t, ka.Key)
	bind(t, sa, protocol.BindRequest{Protocol: "http"})
	serveHTTP(t, sa, says("exact"))
	kb := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "*.Example.net", Owner: ownerB})
	if kb.Address != "*.example.net" {
		t.Fatalf("wildcard key's address %q", kb.Address)
	}
	sb := e.mustDial(t, kb.Key)
	if r := bind(t, sb, protocol.BindRequest{Protocol: "http"}); !strings.Contains(r.URL, "*.example.net") {
		t.Fatalf("wildcard bind URL %q", r.URL)
	}
	serveHTTP(t, sb, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("wildcard " + r.Host))
	}))
	for host, want := range map[string]string{
		"shop.example.net":     "exact",
		"x.example.net":        "wildcard x.example.net",
		"a.b.example.net":      "wildcard a.b.example.net",
		"x.shop.example.net":   "wildcard x.shop.example.net", // an exact name does not cover the names under it
		"X.Example.NET:80":     "wildcard x.example.net:80",
		"example.net":          "",
		"unrelated.example.io": "",
	} {
		code, body, _ := e.get(t, host, "/", nil)
		if want == "" {
			if code != http.StatusNotFound {
				t.Errorf("%s: %d %q, want 404", host, code, body)
			}
			continue
		}
		if code != http.StatusOK || !strings.EqualFold(body, want) {
			t.Errorf("%s: %d %q, want %q", host, code, body, want)
		}
	}

	// Negative: the exact holder's tunnel goes down; its host must not
	// fall to the other owner's wildcard.
	_ = sa.Close()
	waitFor(t, "the exact holder's session to end", func() bool {
		k, err := c.GetTunnelKey(ctx, ka.ID)
		return err == nil && k.Session == nil
	})
	code, body, _ := e.get(t, "shop.example.net", "/", nil)
	if code != http.StatusBadGateway || strings.Contains(body, "wildcard") {
		t.Fatalf("shop.example.net with its tunnel down: %d %q, want 502 not connected", code, body)
	}

	// Negative: the wildcard's holder cannot take the exact name, nor set
	// its certificate; others cannot take names under the wildcard.
	wantKeyOwned(t, e, apiwire.CreateTunnelKey{Protocol: "http", Address: "shop.example.net", Owner: ownerB}, ownerA)
	wantKeyOwned(t, e, apiwire.CreateTunnelKey{Protocol: "http", Address: "new.example.net", Owner: ownerA}, ownerB)
	wantKeyOwned(t, e, apiwire.CreateTunnelKey{Protocol: "http", Address: "*.deep.example.net", Owner: ownerA}, ownerB)
	wantKeyOwned(t, e, apiwire.CreateTunnelKey{Protocol: "http", Address: "*.shop.example.net", Owner: ownerB}, ownerA)
	e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "new.example.net", Owner: ownerB})
	e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "*.shop.example.net", Owner: ownerA})

	// Certificates: ownerB's wildcard certificate is served for the names
	// it covers, not for ownerA's shop.example.net, which has none.
	certFile, keyFile, _ := writeServerCert(t, t.TempDir(), []string{"*.example.net"}, nil)
	in := apiwire.PutCertificate{ChainPEM: readFile(t, certFile), KeyPEM: readFile(t, keyFile)}
	if _, err := c.PutCertificate(ctx, "*.example.net", ownerA, in); apiwire.CodeOf(err) != apiwire.CodeAddressOwned {
		t.Fatalf("ownerA set ownerB's wildcard certificate: %v", err)
	}
	if _, err := c.PutCertificate(ctx, "shop.example.net", ownerB, in); apiwire.CodeOf(err) != apiwire.CodeAddressOwned {
		t.Fatalf("ownerB set the certificate of ownerA's host: %v", err)
	}
	if _, err := c.PutCertificate(ctx, "*.example.net", ownerB, in); err != nil {
		t.Fatalf("the wildcard's holder's certificate: %v", err)
	}
	wild, def := leafOfFile(t, certFile), leafOfFile(t, defCert)
	if got := leafAt(t, e.HTTPSAddr(), "x.example.net"); !got.Equal(wild) {
		t.Errorf("x.example.net: served %v, want ownerB's wildcard", got.DNSNames)
	}
	if got := leafAt(t, e.HTTPSAddr(), "shop.example.net"); !got.Equal(def) {
		t.Errorf("shop.example.net (ownerA's): served %v, want the edge's own, not ownerB's wildcard", got.DNSNames)
	}
}

// Which wildcards a key may name: under a subdomain of the base domain on
// any edge; under any name on an --any-host edge; never over the base
// domain itself or a top-level domain, nor in another place than the
// first label. Only a tunnel key issued for a wildcard binds it.
func TestWildcardKeysWhereTheParentMayBeHeld(t *testing.T) {
	e := startEdge(t, t.TempDir())
	c := e.client(e.writeKey)
	ctx := context.Background()
	k := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "*.team." + baseDomain, Owner: ownerA})
	for _, addr := range []string{"*." + baseDomain, "*.example.net", "*.com", "a.*." + baseDomain, "*"} {
		_, err := c.CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "http", Address: addr, Owner: ownerA})
		if code := apiCode(err); code != apiwire.CodeInvalidDomain {
			t.Errorf("key for %q: %v, want invalid_domain", addr, err)
		}
	}
	wantKeyOwned(t, e, apiwire.CreateTunnelKey{Protocol: "http", Address: "*.team." + baseDomain, Owner: ownerB}, ownerA)
	if _, err := c.CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "http", Address: "*.x.team." + baseDomain, Owner: ownerA}); apiCode(err) != apiwire.CodeInvalidDomain {
		t.Errorf("a wildcard under a name that is not a subdomain of the base domain: %v, want invalid_domain", err)
	}

	s := e.mustDial(t, k.Key)
	bind(t, s, protocol.BindRequest{Protocol: "http"})
	serveHTTP(t, s, says("team"))
	if code, body, _ := e.get(t, "app.team."+baseDomain, "/", nil); code != http.StatusOK || body != "team" {
		t.Fatalf("app.team: %d %q", code, body)
	}
	// Another key (an API key with tunnels:connect) names the wildcard.
	connectKey, err := e.CreateAPIKey("user", []string{apiwire.ScopeConnect})
	if err != nil {
		t.Fatal(err)
	}
	other := e.mustDial(t, connectKey)
	if _, err := other.Bind(ctx, protocol.BindRequest{Protocol: "http", Domain: "*.other." + baseDomain}); err == nil {
		t.Fatal("a connect key bound a wildcard no key was issued for")
	}
}
