package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
)

const (
	ownerA = "cluster-1/demo"
	ownerB = "cluster-1/attacker"
)

func says(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) })
}

// wantBindOwned checks a bind refused with address_owned naming owner.
func wantBindOwned(t *testing.T, s *tunnelclient.Session, req protocol.BindRequest, owner string) {
	t.Helper()
	_, err := s.Bind(context.Background(), req)
	var be *tunnelclient.BindError
	if !errors.As(err, &be) || be.Code != protocol.CodeAddressOwned || !strings.Contains(be.Message, owner) {
		t.Fatalf("bind %+v = %v, want address_owned naming %s", req, err, owner)
	}
}

func wantKeyOwned(t *testing.T, e *testEdge, in apiwire.CreateTunnelKey, owner string) {
	t.Helper()
	_, err := e.client(e.writeKey).CreateTunnelKey(context.Background(), in)
	if got, ok := apiwire.OwnerOf(err); !ok || got != owner {
		t.Fatalf("key %+v = %v, want address_owned by %s", in, err, owner)
	}
}

// TestClaimHoldsWhileSessionIsDown: a bare subdomain stays its first
// owner's whether or not that owner's session is up, against another
// owner's tunnel key and against a user's own API key.
func TestClaimHoldsWhileSessionIsDown(t *testing.T) {
	e := startEdge(t, t.TempDir())
	host := "shop." + baseDomain
	ka := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "shop", Owner: ownerA})
	sa := e.mustDial(t, ka.Key)
	bind(t, sa, protocol.BindRequest{Protocol: "http"})
	serveHTTP(t, sa, says("owner"))

	// The attacker's key for any address, then a bind of the claimed one.
	kb := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Owner: ownerB})
	connectKey, err := e.CreateAPIKey("user", []string{apiwire.ScopeConnect})
	if err != nil {
		t.Fatal(err)
	}
	attack := func(phase string) {
		t.Helper()
		wantKeyOwned(t, e, apiwire.CreateTunnelKey{Protocol: "http", Address: "shop", Owner: ownerB}, ownerA)
		for _, k := range []string{kb.Key, connectKey} {
			s := e.mustDial(t, k)
			wantBindOwned(t, s, protocol.BindRequest{Protocol: "http", Subdomain: "shop"}, ownerA)
			wantBindOwned(t, s, protocol.BindRequest{Protocol: "http", Domain: host}, ownerA)
			_ = s.Close()
		}
		if _, body, _ := e.get(t, host, "/", nil); body == "attacker" {
			t.Fatalf("%s: the attacker answered for %s", phase, host)
		}
	}
	attack("session up")
	if code, body, _ := e.get(t, host, "/", nil); code != 200 || body != "owner" {
		t.Fatalf("owner's tunnel: %d %q", code, body)
	}

	_ = sa.Close()
	waitFor(t, "the owner's session to end", func() bool {
		k, err := e.client(e.writeKey).GetTunnelKey(context.Background(), ka.ID)
		return err == nil && k.Session == nil
	})
	attack("session down")

	// The owner comes back with the same key and gets its address.
	sa2 := e.mustDial(t, ka.Key)
	bind(t, sa2, protocol.BindRequest{Protocol: "http"})
	serveHTTP(t, sa2, says("owner"))
	if code, body, _ := e.get(t, host, "/", nil); code != 200 || body != "owner" {
		t.Fatalf("owner after reconnect: %d %q", code, body)
	}
}

func TestClaimReleasedWithOwnersLastKey(t *testing.T) {
	e := startEdge(t, t.TempDir())
	ctx := context.Background()
	c := e.client(e.writeKey)
	ka := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "cart", Owner: ownerA})
	kb := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Owner: ownerB})
	sb := e.mustDial(t, kb.Key)
	wantBindOwned(t, sb, protocol.BindRequest{Protocol: "http", Subdomain: "cart"}, ownerA)
	if err := c.RevokeTunnelKey(ctx, ka.ID); err != nil {
		t.Fatal(err)
	}
	bind(t, sb, protocol.BindRequest{Protocol: "http", Subdomain: "cart"})
	serveHTTP(t, sb, says("second owner"))
	if code, body, _ := e.get(t, "cart."+baseDomain, "/", nil); code != 200 || body != "second owner" {
		t.Fatalf("after release: %d %q", code, body)
	}
}

func TestClaimsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	e1 := startEdge(t, dir)
	e1.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "kept", Owner: ownerA})
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := startEdge(t, dir, func(c *server.Config) {
		c.APIListen, c.SSHListen, c.HTTPListen = e1.cfg.APIListen, e1.cfg.SSHListen, e1.cfg.HTTPListen
		c.TCPPortRange = e1.cfg.TCPPortRange
	})
	wantKeyOwned(t, e2, apiwire.CreateTunnelKey{Protocol: "http", Address: "kept", Owner: ownerB}, ownerA)
	kb := e2.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Owner: ownerB})
	wantBindOwned(t, e2.mustDial(t, kb.Key), protocol.BindRequest{Protocol: "http", Subdomain: "kept"}, ownerA)
}

func TestOwnedTCPEndpointBind(t *testing.T) {
	e := startEdge(t, t.TempDir())
	ctx := context.Background()
	ep, err := e.client(e.writeKey).CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: "pg", Sharing: apiwire.Sharing{Owner: ownerA}})
	if err != nil {
		t.Fatal(err)
	}
	wantKeyOwned(t, e, apiwire.CreateTunnelKey{Protocol: "tcp", Address: "pg", Owner: ownerB}, ownerA)
	wantKeyOwned(t, e, apiwire.CreateTunnelKey{Protocol: "tcp", Address: strconv.Itoa(ep.Port), Owner: ownerB}, ownerA)
	kb := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "tcp", Owner: ownerB})
	connectKey, _ := e.CreateAPIKey("c", []string{apiwire.ScopeConnect})
	for _, k := range []string{kb.Key, connectKey} {
		s := e.mustDial(t, k)
		wantBindOwned(t, s, protocol.BindRequest{Protocol: "tcp", Alias: "pg"}, ownerA)
		wantBindOwned(t, s, protocol.BindRequest{Protocol: "tcp", Alias: strconv.Itoa(ep.Port)}, ownerA)
	}
	ka := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "tcp", Address: "pg", Owner: ownerA})
	bind(t, e.mustDial(t, ka.Key), protocol.BindRequest{Protocol: "tcp"})
}

// TestUnsharingEndsLiveSession: taking an owner off shared_with ends its
// live tunnel at once.
func TestUnsharingEndsLiveSession(t *testing.T) {
	e := startEdge(t, t.TempDir())
	ctx := context.Background()
	c := e.client(e.writeKey)
	if _, err := c.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "team", Sharing: apiwire.Sharing{Owner: ownerA, SharedWith: []string{ownerB}}}); err != nil {
		t.Fatal(err)
	}
	kb := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "team", Owner: ownerB})
	sb := e.mustDial(t, kb.Key)
	bind(t, sb, protocol.BindRequest{Protocol: "http"})
	serveHTTP(t, sb, says("shared"))
	if code, body, _ := e.get(t, "team."+baseDomain, "/", nil); code != 200 || body != "shared" {
		t.Fatalf("shared: %d %q", code, body)
	}
	if _, err := c.ShareDomain(ctx, "team."+baseDomain, ownerA, nil); err != nil {
		t.Fatal(err)
	}
	if te := asTerminated(waitDone(t, sb)); te == nil || te.Code != protocol.CodeAddressOwned || !strings.Contains(te.Reason, ownerA) {
		t.Fatalf("session end: %v", te)
	}
	sb2 := e.mustDial(t, kb.Key)
	wantBindOwned(t, sb2, protocol.BindRequest{Protocol: "http"}, ownerA)
}
