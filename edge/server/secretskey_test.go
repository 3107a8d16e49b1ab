package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/secrets"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/tests/testedge"
)

// A copy of edge.db must not reveal secret values, in clear or base64.
func TestSecretsEncryptedAtRest(t *testing.T) {
	dir := t.TempDir()
	e := startEdge(t, dir)
	value := "correct-horse-battery-staple-" + base64.RawURLEncoding.EncodeToString(randomBytes(t, 12))
	if _, err := e.client(e.fullKey).PutSecret(context.Background(), "team-a/db",
		apiwire.PutSecret{Data: map[string][]byte{"password": []byte(value)}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(filepath.Join(dir, "edge.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, enc := range []string{value, base64.StdEncoding.EncodeToString([]byte(value)), base64.RawStdEncoding.EncodeToString([]byte(value))} {
		if bytes.Contains(db, []byte(enc)) {
			t.Fatalf("edge.db holds the secret's value (%q)", enc)
		}
	}
	// What it does hold, by design: the name and the key names.
	if !bytes.Contains(db, []byte("team-a/db")) || !bytes.Contains(db, []byte("password")) {
		t.Fatal("edge.db lacks the secret's metadata")
	}
	// The generated key lives beside it, private.
	fi, err := os.Stat(server.SecretsKeyPath(dir))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("generated key file: %v %v", fi, err)
	}
	keys, err := secrets.LoadKeyFile(server.SecretsKeyPath(dir))
	if err != nil || len(keys) != 1 {
		t.Fatalf("generated key file: %v", err)
	}
	if bytes.Contains(db, keys[0]) || bytes.Contains(db, []byte(base64.StdEncoding.EncodeToString(keys[0]))) {
		t.Fatal("edge.db holds the encryption key")
	}
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func newSecretsKey(t *testing.T) string {
	return base64.StdEncoding.EncodeToString(randomBytes(t, secrets.KeySize))
}

// newEdge builds (without starting) an edge on dir, for start-up errors.
func newEdge(t *testing.T, dir string, mutate func(*server.Config)) (*server.Edge, error) {
	t.Helper()
	cfg := testedge.Config(t, dir)
	mutate(&cfg)
	e, err := server.New(cfg)
	if err == nil {
		t.Cleanup(func() { _ = e.Close() })
	}
	return e, err
}

// Rotation: prepend a new key, restart (everything is re-encrypted), drop
// the old key, restart. A missing key stops the edge with its id named.
func TestSecretsKeyRotation(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	oldKey := newSecretsKey(t)
	e1 := startEdge(t, dir, func(c *server.Config) { c.SecretsKeys = []string{oldKey} })
	for _, n := range []string{"a", "b/c"} {
		if _, err := e1.client(e1.fullKey).PutSecret(ctx, n, apiwire.PutSecret{Data: map[string][]byte{"k": []byte("v-" + n)}}); err != nil {
			t.Fatal(err)
		}
	}
	_ = e1.Close()
	if _, err := os.Stat(server.SecretsKeyPath(dir)); err == nil {
		t.Fatal("a key file was generated although a key was configured")
	}

	// No key configured and no file: refused, as a new key cannot open them.
	if _, err := newEdge(t, dir, func(*server.Config) {}); err == nil || !strings.Contains(err.Error(), keyIDOf(t, oldKey)) {
		t.Fatalf("start without the key: %v", err)
	}
	if _, err := os.Stat(server.SecretsKeyPath(dir)); err == nil {
		t.Fatal("a key file was generated for a database with secrets")
	}
	// Another key only: refused, naming the missing key.
	newKey := newSecretsKey(t)
	_, err := newEdge(t, dir, func(c *server.Config) { c.SecretsKeys = []string{newKey} })
	if err == nil || !strings.Contains(err.Error(), keyIDOf(t, oldKey)) || !strings.Contains(err.Error(), "--secrets-key-file") {
		t.Fatalf("start with a wrong key: %v", err)
	}

	// New key first, old key after, in a file.
	keyFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keyFile, []byte(newKey+"\n"+oldKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	e2 := startEdge(t, dir, func(c *server.Config) { c.SecretsKeyFile = keyFile }, withLog(&logs))
	_ = e2.Close()
	if l := logs.String(); !strings.Contains(l, "re_encrypted=2") || !strings.Contains(l, "sealed_with_other_keys=0") ||
		!strings.Contains(l, "unused_keys="+keyIDOf(t, oldKey)) {
		t.Fatalf("the rotation is not logged:\n%s", l)
	}
	if strings.Contains(logs.String(), "v-b/c") {
		t.Fatal("a secret value was logged")
	}
	if err := os.WriteFile(keyFile, []byte(newKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e3 := startEdge(t, dir, func(c *server.Config) { c.SecretsKeyFile = keyFile })
	s, err := e3.client(e3.fullKey).GetSecret(ctx, "b/c")
	if err != nil || string(s.Data["k"]) != "v-b/c" {
		t.Fatalf("after rotation: %+v %v", s, err)
	}

	// A configured key file must exist; both sources at once are refused.
	if _, err := newEdge(t, t.TempDir(), func(c *server.Config) { c.SecretsKeyFile = filepath.Join(dir, "nope") }); err == nil {
		t.Fatal("a missing --secrets-key-file was accepted")
	}
	if _, err := newEdge(t, t.TempDir(), func(c *server.Config) {
		c.SecretsKeyFile, c.SecretsKeys = keyFile, []string{newKey}
	}); err == nil {
		t.Fatal("both a key file and keys were accepted")
	}
}

func keyIDOf(t *testing.T, b64 string) string {
	t.Helper()
	k, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	return secrets.KeyID(k)
}
