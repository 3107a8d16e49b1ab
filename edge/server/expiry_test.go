package server_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
)

func TestTunnelKeyExpires(t *testing.T) {
	e := startEdge(t, t.TempDir(), func(c *server.Config) { c.TunnelKeyTTL = time.Second })
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http"})
	if tk.ExpiresAt == nil || !tk.ExpiresAt.Equal(tk.CreatedAt.Add(time.Second)) || tk.TTLSeconds != 1 {
		t.Fatalf("new key: expires_at %v ttl_seconds %d, want created_at+1s and 1", tk.ExpiresAt, tk.TTLSeconds)
	}
	s := e.mustDial(t, tk.Key)
	bind(t, s, protocol.BindRequest{Protocol: "http", Subdomain: "brief"})

	// The live session is ended once the key expires.
	term := asTerminated(waitDone(t, s))
	if term == nil || term.Code != protocol.CodeKeyExpired || !strings.Contains(term.Reason, tk.ID) {
		t.Fatalf("session ended with %v, want a key_expired termination naming %s", s.Err(), tk.ID)
	}
	if time.Now().Before(*tk.ExpiresAt) {
		t.Fatalf("session ended at %v, before the key's expiry %v", time.Now(), tk.ExpiresAt)
	}
	_, err := e.dial(t, tk.Key)
	var ae *tunnelclient.AuthError
	if !errors.As(err, &ae) || ae.Code != protocol.CodeKeyExpired || !strings.HasPrefix(ae.Reason, "key_expired: tunnel key "+tk.ID+" expired at ") {
		t.Fatalf("login with the expired key: %v, want an AuthError starting with key_expired", err)
	}
	_, err = e.client(e.writeKey).RenewTunnelKey(context.Background(), tk.ID)
	if apiCode(err) != apiwire.CodeKeyExpired {
		t.Fatalf("renewing an expired key: %v, want code key_expired", err)
	}
	if code, _, _ := e.get(t, "brief."+baseDomain, "/", nil); code != http.StatusNotFound {
		t.Fatalf("host of the expired key answers %d, want 404", code)
	}
}

func TestTunnelKeyRenewalKeepsSession(t *testing.T) {
	const ttl = 3 * time.Second
	e := startEdge(t, t.TempDir(), func(c *server.Config) { c.TunnelKeyTTL = ttl })
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http"})
	s := e.mustDial(t, tk.Key)
	bind(t, s, protocol.BindRequest{Protocol: "http", Subdomain: "kept"})
	c := e.client(e.writeKey)
	// Renew often, until well past the first expiry.
	last := *tk.ExpiresAt
	for time.Now().Before(tk.ExpiresAt.Add(time.Second)) {
		before := time.Now()
		k, err := c.RenewTunnelKey(context.Background(), tk.ID)
		if err != nil {
			t.Fatalf("renew: %v", err)
		}
		if k.ExpiresAt == nil || k.ExpiresAt.Before(before.Add(ttl).Add(-time.Second)) || k.ExpiresAt.Before(last) {
			t.Fatalf("renewed expires_at %v: want about now+%s, not before %v", k.ExpiresAt, ttl, last)
		}
		last = *k.ExpiresAt
		select {
		case <-s.Done():
			t.Fatalf("session ended although its key was renewed: %v", s.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	got, err := c.GetTunnelKey(context.Background(), tk.ID)
	if err != nil || got.Session == nil || !got.ExpiresAt.After(*tk.ExpiresAt) {
		t.Fatalf("key after renewals: %+v %v; want a later expiry and a live session", got, err)
	}
	if _, err := c.RenewTunnelKey(context.Background(), "nope"); apiCode(err) != apiwire.CodeNotFound {
		t.Fatalf("renewing a missing key: %v", err)
	}
}

func TestTunnelKeyExpiryOff(t *testing.T) {
	e := startEdge(t, t.TempDir(), func(c *server.Config) { c.TunnelKeyTTL = -1 })
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http"})
	if tk.ExpiresAt != nil {
		t.Fatalf("with expiry off a key has expires_at %v", tk.ExpiresAt)
	}
}

// An edge upgraded from one without expiry gives the keys it finds a full
// TTL from its start, so the upgrade cuts no tunnel.
func TestKeysWithoutExpiryGetOneAtStart(t *testing.T) {
	dir := t.TempDir()
	e1 := startEdge(t, dir, func(c *server.Config) { c.TunnelKeyTTL = -1 })
	tk := e1.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http"})
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	e2 := startEdge(t, dir, func(c *server.Config) { c.TunnelKeyTTL = time.Hour })
	got, err := e2.client(e2.writeKey).GetTunnelKey(context.Background(), tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ExpiresAt == nil || got.ExpiresAt.Before(started.Add(time.Hour).Add(-time.Second)) || got.TTLSeconds != 3600 {
		t.Fatalf("old key after the upgrade: expires_at %v ttl_seconds %d, want about start+1h and 3600", got.ExpiresAt, got.TTLSeconds)
	}
	e2.mustDial(t, tk.Key)
}
