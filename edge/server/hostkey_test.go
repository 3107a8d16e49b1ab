package server_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/tests/testedge"
)

// TestHostKeyMovesOutOfTheDatabase starts an edge on the database an old
// edge left, with the host key inside it.
func TestHostKeyMovesOutOfTheDatabase(t *testing.T) {
	dir := t.TempDir()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "old edge")
	if err != nil {
		t.Fatal(err)
	}
	pemBytes := pem.EncodeToMemory(block)
	pub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	wantPub := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetLegacyHostKey(pemBytes); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// New alone: no later write may reuse the freed page and hide a copy.
	e, err := server.New(testedge.Config(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if got := e.HostKey(); got != wantPub {
		t.Fatalf("host key after migration = %q, want the database's %q", got, wantPub)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	assertKeyFile(t, filepath.Join(dir, "ssh_host_ed25519_key"), pemBytes)

	db, err := os.ReadFile(filepath.Join(dir, "edge.db"))
	if err != nil {
		t.Fatal(err)
	}
	// The PEM's base64 body and the raw key bytes: neither may survive in
	// the file, not even in a freed page.
	body := pemBytes[bytes.IndexByte(pemBytes, '\n')+1 : bytes.LastIndex(pemBytes, []byte("-----END"))]
	for name, secret := range map[string][]byte{"PEM body": body[:64], "private key seed": priv.Seed()} {
		if bytes.Contains(db, secret) {
			t.Errorf("edge.db still contains the host key's %s", name)
		}
	}
	st, err = store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.LegacyHostKey(); err == nil {
		t.Fatal("the database still holds a host key")
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// Agents that pinned the old key still reach the started edge.
	te := startEdge(t, dir)
	if got := te.info(t).SSHHostKey; got != wantPub {
		t.Fatalf("GET /v1/edge host key = %q, want %q", got, wantPub)
	}
}

func TestHostKeyFileCreatedAndKept(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(t.TempDir(), "keys", "edge_key") // a path given by flag
	set := func(c *server.Config) { c.HostKeyFile = path }
	e1 := startEdge(t, dir, set)
	first := e1.info(t).SSHHostKey
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	assertKeyFile(t, path, data)
	if _, err := os.Stat(filepath.Join(dir, "ssh_host_ed25519_key")); !os.IsNotExist(err) {
		t.Fatalf("a key file was written to the data dir too: %v", err)
	}
	e2 := startEdge(t, dir, set)
	if got := e2.info(t).SSHHostKey; got != first {
		t.Fatal("host key changed across restart")
	}
}

func assertKeyFile(t *testing.T, path string, want []byte) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("host key file: %v", err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Errorf("host key file mode = %o, want 600", mode)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("host key file does not hold the expected key")
	}
}
