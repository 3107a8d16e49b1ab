package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/dnstest"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
)

// acmeStandIn is a local stand-in for an ACME CA: it publishes a directory
// and refuses everything else, counting every request. A CA that issues
// nothing is enough here: the test is about whether the edge asks at all.
type acmeStandIn struct {
	srv      *httptest.Server
	requests atomic.Int64
}

func startACMEStandIn(t *testing.T) *acmeStandIn {
	t.Helper()
	a := &acmeStandIn{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.requests.Add(1)
		if r.URL.Path == "/directory" {
			base := "http://" + r.Host
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"newNonce":"` + base + `/nonce","newAccount":"` + base + `/account",` +
				`"newOrder":"` + base + `/order","revokeCert":"` + base + `/revoke","keyChange":"` + base + `/key"}`))
			return
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"type":"urn:ietf:params:acme:error:unauthorized","detail":"this stand-in CA issues nothing"}`))
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// syncBuffer collects the edge's log for assertions.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// handshake opens a TLS connection to the edge's HTTPS listener with SNI
// name. The stand-in CA never issues, so the handshake always fails; what
// matters is whether the edge asked the CA before it did.
func handshake(t *testing.T, addr, name string) {
	t.Helper()
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: &tls.Config{ServerName: name, MinVersion: tls.VersionTLS12}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		_ = c.Close()
		t.Fatalf("TLS handshake for %s succeeded, but the stand-in CA issues no certificate", name)
	}
}

// TestACMEOnlyForServedNames: a TLS client may send any SNI name. The edge
// must order certificates only for names a reservation, a tunnel key or a
// live tunnel serves; anything else is refused without a single request to
// the CA, or a client could spend the base domain's rate limit.
func TestACMEOnlyForServedNames(t *testing.T) {
	ca := startACMEStandIn(t)
	dns := dnstest.Start(t)
	var logs syncBuffer
	e := startEdge(t, t.TempDir(), func(c *server.Config) {
		c.HTTPSListen = "127.0.0.1:0"
		c.ACMEDirectory = ca.srv.URL + "/directory"
		c.DNSResolver = dns.Addr()
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	ctx := context.Background()
	api := e.client(e.writeKey)

	if _, err := api.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "reserved"}); err != nil {
		t.Fatal(err)
	}
	custom, err := api.CreateDomain(ctx, apiwire.CreateDomain{Domain: "www.example.org"})
	if err != nil || custom.Verified {
		t.Fatalf("custom domain: %+v, %v (want unverified)", custom, err)
	}
	keyed := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "keyed"})
	anyKey := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http"})
	live := e.mustDial(t, anyKey.Key)
	bind(t, live, protocol.BindRequest{Protocol: "http", Subdomain: "live"})

	refused := func(name, why string) {
		t.Helper()
		before := ca.requests.Load()
		handshake(t, e.HTTPSAddr(), name)
		if n := ca.requests.Load() - before; n != 0 {
			t.Errorf("SNI %s: the edge sent %d requests to the CA, want none", name, n)
		}
		waitFor(t, "the refusal of "+name+" in the log", func() bool { return strings.Contains(logs.String(), why) })
	}
	ordered := func(name string) {
		t.Helper()
		before := ca.requests.Load()
		handshake(t, e.HTTPSAddr(), name)
		if ca.requests.Load() == before {
			t.Errorf("SNI %s: the edge never asked the CA, want an ACME request", name)
		}
	}

	notServed := func(h string) string { return "no reservation, tunnel key or live tunnel serves " + h }
	refused("random."+baseDomain, notServed("random."+baseDomain))
	refused("a.b."+baseDomain, notServed("a.b."+baseDomain))
	refused(baseDomain, notServed(baseDomain))
	refused("www.example.org", "custom domain www.example.org is not verified yet")
	refused("elsewhere.example.org", notServed("elsewhere.example.org"))

	ordered("reserved." + baseDomain)
	ordered("keyed." + baseDomain)
	ordered("LIVE." + baseDomain) // SNI is matched case-insensitively

	// Verification through the API lets the custom domain through.
	for _, r := range custom.DNSRecords {
		switch r.Type {
		case "CNAME":
			dns.SetCNAME(r.Name, r.Value)
		case "TXT":
			dns.SetTXT(r.Name, r.Value)
		}
	}
	if d, err := api.VerifyDomain(ctx, custom.Name, ""); err != nil || !d.Verified {
		t.Fatalf("verify: %+v, %v", d, err)
	}
	ordered("www.example.org")

	// Revoking the key and ending the session take the names away again.
	if err := api.RevokeTunnelKey(ctx, keyed.ID); err != nil {
		t.Fatal(err)
	}
	refused("keyed."+baseDomain, notServed("keyed."+baseDomain))
	_ = live.Close()
	waitFor(t, "live session to end", func() bool { return len(e.ActiveSessions()) == 0 })
	refused("live."+baseDomain, notServed("live."+baseDomain))
}
