package server_test

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"encoding/pem"
	"os"
	"slices"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/secrets"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
	"code.tuna.am/tuna/k8s-operator/edge/server"
)

// Rotating the secrets key reseals the HTTPS listener's keys too: a
// certificate's private key and the session ticket keys sealed with the
// old key are sealed with the new one at the first start that holds both,
// so that once the log says no record uses the old key, dropping it
// strands nothing: the next start, with the new key alone, serves the
// stored certificate.
func TestSecretsKeyRotationCoversHTTPSKeys(t *testing.T) {
	dir := t.TempDir()
	defCert, defKey, _ := writeWildcardCert(t, t.TempDir())
	https := func(keys ...string) func(*server.Config) {
		return func(c *server.Config) {
			c.SecretsKeys = keys
			c.HTTPSListen = "127.0.0.1:0"
			c.TLSCertFile, c.TLSKeyFile = defCert, defKey
		}
	}
	oldKey, newKey := newSecretsKey(t), newSecretsKey(t)
	host := "own." + baseDomain

	// An edge with the old key makes its ticket keys; a key for host lets
	// the HTTPS listener serve it.
	e1 := startEdge(t, dir, https(oldKey))
	e1.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "own"})
	_ = e1.Close()

	// A certificate of host's own (not the wildcard default), its key
	// sealed with the old key as the edge seals them.
	certFile, keyFile, pool := writeServerCert(t, t.TempDir(), []string{host}, nil)
	chainPEM, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	oldRing := keyring(t, oldKey)
	var sealed store.Sealed
	if sealed.KeyID, sealed.Nonce, sealed.Data, err = oldRing.Seal(store.TLSCertSealName(host), keyPEM); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := st.PutTLSCert(store.TLSCert{Host: host, ChainPEM: chainPEM, Key: sealed, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	tickets, err := st.TicketKeys()
	if err != nil || len(tickets) == 0 {
		t.Fatalf("the first edge stored no ticket keys (%v): the test would prove nothing of them", err)
	}
	ids, err := st.SealedKeyIDs()
	if err != nil || !slices.Equal(ids, []string{keyIDOf(t, oldKey)}) {
		t.Fatalf("sealed with %v (%v), want the old key only", ids, err)
	}
	_ = st.Close()

	// New key first, old key after: everything is resealed, and the log
	// says the old key is free to go.
	var logs lockedBuffer
	e2 := startEdge(t, dir, https(newKey, oldKey), withLog(&logs))
	_ = e2.Close()
	if l := logs.String(); !bytes.Contains([]byte(l), []byte("sealed_with_other_keys=0")) ||
		!bytes.Contains([]byte(l), []byte("unused_keys="+keyIDOf(t, oldKey))) {
		t.Fatalf("the rotation is not logged as complete:\n%s", l)
	}
	if st, err = store.Open(dir); err != nil {
		t.Fatal(err)
	}
	ids, err = st.SealedKeyIDs()
	_ = st.Close()
	if err != nil || !slices.Equal(ids, []string{keyIDOf(t, newKey)}) {
		t.Fatalf("after the rotation, records are sealed with %v (%v), want the new key only", ids, err)
	}

	// The old key gone: the stored certificate is still served.
	e3 := startEdge(t, dir, https(newKey))
	conn, err := tls.Dial("tcp", e3.HTTPSAddr(), &tls.Config{ServerName: host, RootCAs: pool})
	if err != nil {
		t.Fatalf("handshake for %s after the old key left: %v", host, err)
	}
	defer conn.Close()
	leaf := conn.ConnectionState().PeerCertificates[0]
	block, _ := pem.Decode(chainPEM)
	if !bytes.Equal(leaf.Raw, block.Bytes) {
		t.Fatalf("served %v, want the stored certificate of %s", leaf.DNSNames, host)
	}
}

func keyring(t *testing.T, b64 ...string) *secrets.Keyring {
	t.Helper()
	var keys [][]byte
	for _, k := range b64 {
		raw, err := base64.StdEncoding.DecodeString(k)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, raw)
	}
	r, err := secrets.NewKeyring(keys)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
