package api_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/api"
	"code.tuna.am/tuna/k8s-operator/edge/internal/certs"
	"code.tuna.am/tuna/k8s-operator/edge/internal/secrets"
)

// selfSigned is a certificate for names valid from notBefore to notAfter,
// and its key, in PEM.
func selfSigned(t *testing.T, notBefore, notAfter time.Time, names ...string) (chainPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), DNSNames: names, NotBefore: notBefore, NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
}

// A host's own certificate: only the owner that holds the host sets,
// reads or removes it; it must name the host and be valid; its key is
// stored sealed; the HTTPS listener serves it while the owner holds the
// host, and the edge's certificate again once the host is released or the
// certificate removed.
func TestOwnCertificateOfAHost(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	ring, err := secrets.NewKeyring([][]byte{bytes.Repeat([]byte{7}, secrets.KeySize)})
	if err != nil {
		t.Fatal(err)
	}
	defChain, defKey := selfSigned(t, now().Add(-time.Hour), now().Add(time.Hour), "edge.tuna.localhost")
	def, err := tls.X509KeyPair([]byte(defChain), []byte(defKey))
	if err != nil {
		t.Fatal(err)
	}
	// The manager needs the fixture's store, which the API's config
	// names first.
	lazy := &lazyCertificates{}
	f := newFixtureWith(t, "", func(c *api.Config) {
		c.AnyHost, c.Now, c.Certificates = true, now, lazy
	})
	m, err := certs.New(certs.Config{Store: f.st, Seal: ring, Default: &def, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	lazy.Manager = m
	ctx := context.Background()
	c := f.c(f.write)
	const host = "shop.example.net"
	key, err := c.CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "http", Address: host, Owner: "c/a"})
	if err != nil {
		t.Fatal(err)
	}
	chain, keyPEM := selfSigned(t, now().Add(-time.Hour), now().Add(24*time.Hour), host)
	good := apiwire.PutCertificate{ChainPEM: chain, KeyPEM: keyPEM}

	// Refusals, each with the API's code.
	_, err = c.PutCertificate(ctx, host, "c/b", good)
	wantCode(t, err, apiwire.CodeAddressOwned)
	_, err = c.PutCertificate(ctx, host, "", good)
	wantCode(t, err, apiwire.CodeAddressOwned)
	_, err = c.PutCertificate(ctx, "nobody.example.net", "c/a", good)
	wantCode(t, err, apiwire.CodeNotFound)
	bound, err := f.c(f.full).CreateAPIKey(ctx, apiwire.CreateAPIKey{Name: "other", Scopes: []string{apiwire.ScopeWrite}, OwnerPrefix: "d"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.c(bound.Key).PutCertificate(ctx, host, "c/a", good)
	wantCode(t, err, apiwire.CodeForbidden)
	_, err = f.c(f.tunnelKey).PutCertificate(ctx, host, "c/a", good)
	wantCode(t, err, apiwire.CodeForbidden)
	otherChain, otherKey := selfSigned(t, now().Add(-time.Hour), now().Add(time.Hour), "other.example.net")
	expChain, expKey := selfSigned(t, now().Add(-2*time.Hour), now().Add(-time.Hour), host)
	_, strayKey := selfSigned(t, now().Add(-time.Hour), now().Add(time.Hour), host)
	for name, in := range map[string]apiwire.PutCertificate{
		"another name":       {ChainPEM: otherChain, KeyPEM: otherKey},
		"expired":            {ChainPEM: expChain, KeyPEM: expKey},
		"a key of another":   {ChainPEM: chain, KeyPEM: strayKey},
		"no PEM":             {ChainPEM: "Hello world", KeyPEM: "Hello world"},
		"the key as a chain": {ChainPEM: keyPEM, KeyPEM: keyPEM},
	} {
		_, err := c.PutCertificate(ctx, host, "c/a", in)
		if apiwire.CodeOf(err) != apiwire.CodeInvalidRequest {
			t.Errorf("%s: %v, want invalid_request", name, err)
		}
	}
	if _, err := c.GetCertificate(ctx, host, "c/a"); apiwire.CodeOf(err) != apiwire.CodeNotFound {
		t.Fatalf("a certificate before any was set: %v", err)
	}

	// The owner sets it.
	got, err := c.PutCertificate(ctx, host, "c/a", good)
	if err != nil {
		t.Fatal(err)
	}
	if got.Host != host || got.Owner != "c/a" || len(got.DNSNames) != 1 || got.DNSNames[0] != host {
		t.Fatalf("stored %+v", got)
	}
	rec, err := f.st.TLSCert(host)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Owner != "c/a" || rec.Managed || bytes.Contains(rec.Key.Data, []byte(keyPEM)) || bytes.Contains(rec.Key.Data, []byte("PRIVATE KEY")) || len(rec.Key.Data) == 0 {
		t.Fatalf("the stored record: owner %q managed %v, key in clear: %v", rec.Owner, rec.Managed, bytes.Contains(rec.Key.Data, []byte("PRIVATE KEY")))
	}
	if _, err := c.GetCertificate(ctx, host, "c/b"); apiwire.CodeOf(err) != apiwire.CodeAddressOwned {
		t.Fatalf("another owner read it: %v", err)
	}
	if err := c.DeleteCertificate(ctx, host, "c/b"); apiwire.CodeOf(err) != apiwire.CodeAddressOwned {
		t.Fatalf("another owner removed it: %v", err)
	}

	addr := serveCertificates(t, m)
	if leaf := servedLeaf(t, addr, host); !leaf.Equal(mustLeaf(t, chain)) {
		t.Fatalf("served %v, want the owner's certificate", leaf.DNSNames)
	}

	// Released (the owner's last key revoked), the host is no longer the
	// owner's: its certificate is not served, once the cached copy is
	// looked at again.
	if err := c.RevokeTunnelKey(ctx, key.ID); err != nil {
		t.Fatal(err)
	}
	clock.Add(int64(11 * time.Second))
	if leaf := servedLeaf(t, addr, host); leaf.DNSNames[0] != "edge.tuna.localhost" {
		t.Fatalf("served %v for a host its owner released, want the edge's certificate", leaf.DNSNames)
	}
	_, err = c.PutCertificate(ctx, host, "c/a", good)
	wantCode(t, err, apiwire.CodeNotFound)

	// Another owner claims the host, sets its own, then removes it.
	if _, err := c.CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "http", Address: host, Owner: "c/b"}); err != nil {
		t.Fatal(err)
	}
	chainB, keyB := selfSigned(t, now().Add(-time.Hour), now().Add(time.Hour), host)
	if _, err := c.PutCertificate(ctx, host, "c/b", apiwire.PutCertificate{ChainPEM: chainB, KeyPEM: keyB}); err != nil {
		t.Fatal(err)
	}
	if leaf := servedLeaf(t, addr, host); !leaf.Equal(mustLeaf(t, chainB)) {
		t.Fatalf("served %v, want the new owner's certificate", leaf.DNSNames)
	}
	if err := c.DeleteCertificate(ctx, host, "c/b"); err != nil {
		t.Fatal(err)
	}
	if leaf := servedLeaf(t, addr, host); leaf.DNSNames[0] != "edge.tuna.localhost" {
		t.Fatalf("served %v after removal, want the edge's certificate", leaf.DNSNames)
	}
	if err := c.DeleteCertificate(ctx, host, "c/b"); apiwire.CodeOf(err) != apiwire.CodeNotFound {
		t.Fatalf("removing it twice: %v", err)
	}
}

// lazyCertificates is a certs.Manager set after the API is built.
type lazyCertificates struct{ *certs.Manager }

func mustLeaf(t *testing.T, chainPEM string) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode([]byte(chainPEM))
	leaf, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// serveCertificates serves TLS with m's certificates on loopback: each
// handshake answers and closes.
func serveCertificates(t *testing.T, m *certs.Manager) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", m.TLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = conn.(*tls.Conn).Handshake()
				_ = conn.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

// servedLeaf is the leaf certificate the server at addr presents for host.
func servedLeaf(t *testing.T, addr, host string) *x509.Certificate {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: host, InsecureSkipVerify: true}) //nolint:gosec // the test reads the certificate it is given
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}
