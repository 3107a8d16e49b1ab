package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/edge/server"
)

// Every client command reaches a running edge the same way: on its host
// from what the edge wrote in its data directory, elsewhere from flags or
// their variables. Keys are created, rotated and revoked through the API
// while the edge runs, and a wrong --data-dir is an error that makes
// nothing.
func TestClientCommandsReachARunningEdge(t *testing.T) {
	e, dir := startEdge(t)
	cfg, err := server.ReadClientConfig(dir)
	if err != nil || cfg.APIURL != e.APIURL() || cfg.APIFingerprint != e.APIFingerprint() {
		t.Fatalf("the edge's client config: %+v %v (edge at %s, %s)", cfg, err, e.APIURL(), e.APIFingerprint())
	}
	admin, err := e.CreateAPIKey("admin", []string{apiwire.ScopeFull})
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "admin-key")
	if err := os.WriteFile(keyFile, []byte(admin+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	onHost := []string{"TUNA_EDGE_DATA_DIR=" + dir, "TUNA_EDGE_API_KEY_FILE=" + keyFile}

	// As docs/secrets.md writes it, on the edge's host.
	if out := run(t, onHost, "secrets", "set", "team-a/db", "user=app", "password=s3cr3t"); !strings.Contains(out, "team-a/db at version 1") {
		t.Fatalf("secrets set: %q", out)
	}

	// The first step of the key rotation, while the edge runs.
	var k apiwire.APIKey
	out := run(t, onHost, "keys", "create", "--scope", "tunnels:write", "--owner-prefix", "prod-eu-1", "--name", "prod", "-o", "json")
	if err := json.Unmarshal([]byte(out), &k); err != nil || k.OwnerPrefix != "prod-eu-1" || k.Key == "" {
		t.Fatalf("keys create: %q %v", out, err)
	}
	if out := run(t, onHost, "keys", "list"); !strings.Contains(out, k.ID) || !strings.Contains(out, "OWNER PREFIX") || !strings.Contains(out, "prod-eu-1") {
		t.Fatalf("keys list: %q", out)
	}
	stdout, stderr := runBoth(t, onHost, "keys", "rotate", k.ID)
	next := strings.TrimSpace(stdout)
	if !strings.HasPrefix(next, "tuna_") || !strings.Contains(stderr, "key "+k.ID+" still works") {
		t.Fatalf("keys rotate: %q %q", stdout, stderr)
	}
	c := client.New(e.APIURL(), next, client.WithTrust(client.Trust{Fingerprint: e.APIFingerprint()}))
	who, err := c.WhoAmI(context.Background())
	if err != nil || who.Name != "prod" || who.OwnerPrefix != "prod-eu-1" || strings.Join(who.Scopes, ",") != "tunnels:write" {
		t.Fatalf("the rotated key: %+v %v", who, err)
	}
	old := client.New(e.APIURL(), k.Key, client.WithTrust(client.Trust{Fingerprint: e.APIFingerprint()}))
	if _, err := old.WhoAmI(context.Background()); err != nil {
		t.Fatalf("the old key stops before it is revoked: %v", err)
	}
	run(t, onHost, "keys", "revoke", k.ID)
	if _, err := old.WhoAmI(context.Background()); apiwire.CodeOf(err) != apiwire.CodeUnauthorized {
		t.Fatalf("the revoked key still works: %v", err)
	}
	_, stderr = runBoth(t, onHost, "keys", "rotate", who.KeyID, "--revoke")
	if _, err := c.WhoAmI(context.Background()); apiwire.CodeOf(err) != apiwire.CodeUnauthorized || !strings.Contains(stderr, "revoked API key "+who.KeyID) {
		t.Fatalf("rotate --revoke left the old key: %v %q", err, stderr)
	}

	// The owner transfer, with a full key.
	if _, err := client.New(e.APIURL(), admin, client.WithTrust(client.Trust{Fingerprint: e.APIFingerprint()})).CreateDomain(context.Background(),
		apiwire.CreateDomain{Subdomain: "shop", Sharing: apiwire.Sharing{Owner: "lost/shop"}}); err != nil {
		t.Fatal(err)
	}
	if out := run(t, onHost, "owners", "transfer", "--from", "lost", "--to", "rebuilt"); !strings.Contains(out, "owners under lost now under rebuilt") ||
		!strings.Contains(out, "domains (1): shop.tuna.localhost") {
		t.Fatalf("owners transfer: %q", out)
	}

	// Away from the edge's host: the URL and the pin by variable.
	away := []string{"TUNA_EDGE_API_URL=" + e.APIURL(), "TUNA_EDGE_API_FINGERPRINT=" + e.APIFingerprint(), "TUNA_EDGE_API_KEY=" + admin,
		"TUNA_EDGE_DATA_DIR="}
	if out := run(t, away, "secrets", "list"); !strings.Contains(out, "team-a/db") {
		t.Fatalf("secrets list by variables: %q", out)
	}

	// A wrong --data-dir is an error, and makes no database.
	wrong := filepath.Join(t.TempDir(), "not-the-edge")
	for _, args := range [][]string{
		{"keys", "revoke", "0123456789abcdef", "--data-dir", wrong},
		{"keys", "list", "--data-dir", wrong, "--api-url", e.APIURL()},
		{"secrets", "list", "--data-dir", wrong},
	} {
		if msg := runFail(t, []string{"TUNA_EDGE_API_KEY=" + admin}, args...); !strings.Contains(msg, "--data-dir "+wrong+" is not the data directory of an edge that has started") {
			t.Fatalf("%v: %q", args, msg)
		}
	}
	if msg := runFail(t, nil, "keys", "revoke", "0123456789abcdef", "--offline", "--data-dir", wrong); !strings.Contains(msg, "--data-dir "+wrong+" holds no edge state") {
		t.Fatalf("keys revoke --offline with a wrong dir: %q", msg)
	}
	if _, err := os.Stat(wrong); !os.IsNotExist(err) {
		t.Fatalf("a refused command made %s: %v", wrong, err)
	}
	// Offline while the edge runs: bbolt's lock says so.
	if msg := runFail(t, nil, "keys", "list", "--offline", "--data-dir", dir); !strings.Contains(msg, "is tuna-edge running on this data dir") {
		t.Fatalf("offline against a running edge: %q", msg)
	}
}
