package certs

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
)

// manyHosts is a store holding certificates for n hosts, made by the local
// test CA and written to the store directly (an ACME CA would take hours
// for as many). Built once per process: it takes a few seconds.
type manyHosts struct {
	st    *store.Store
	seal  *recordingSealer
	ca    *testCA
	hosts []string
}

var (
	manyOnce sync.Once
	many     *manyHosts
	manyErr  error
)

const manyCount = 10000

func storeWithManyHosts(tb testing.TB) *manyHosts {
	tb.Helper()
	manyOnce.Do(func() {
		dir, err := osTempDir()
		if err != nil {
			manyErr = err
			return
		}
		st, err := store.Open(dir)
		if err != nil {
			manyErr = err
			return
		}
		h := &manyHosts{st: st, seal: testSealer(tb), ca: newTestCA(tb)}
		m, err := New(Config{Store: st, Seal: h.seal})
		if err != nil {
			manyErr = err
			return
		}
		start := time.Now()
		recs := make([]store.TLSCert, 0, manyCount)
		// One key for all: each certificate is still parsed, opened and
		// cached on its own; making 10,000 keys would only cost time.
		leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			manyErr = err
			return
		}
		for i := range manyCount {
			host := fmt.Sprintf("h%05d.many.example", i)
			chain, key, _ := h.ca.issueWithKey(tb, leafKey, host, "", time.Now().Add(48*time.Hour))
			rec, err := m.Record(host, chain, key)
			if err != nil {
				manyErr = err
				return
			}
			recs = append(recs, rec)
			h.hosts = append(h.hosts, host)
		}
		made := time.Now()
		manyErr = st.PutTLSCerts(recs)
		tb.Logf("test CA: %d certificates made in %s, stored in %s", manyCount, made.Sub(start), time.Since(made))
		many = h
	})
	if manyErr != nil {
		tb.Fatal(manyErr)
	}
	return many
}

// serveTLS serves m's certificates on a loopback listener until the test
// ends.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := tls.Server(c, cfg)
				_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
				if tc.Handshake() == nil {
					_, _ = tc.Write([]byte("ok"))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// handshake connects to addr for host, verifying the chain against roots,
// and returns the connection's state.
func handshake(t *testing.T, addr, host string, roots *x509.CertPool) tls.ConnectionState {
	t.Helper()
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: &tls.Config{ServerName: host, RootCAs: roots, MinVersion: tls.VersionTLS12}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("TLS for %s: %v", host, err)
	}
	defer c.Close()
	return c.(*tls.Conn).ConnectionState()
}

// TestCertificatesLoadLazilyWithBoundedCache: with certificates for 10,000
// hosts in the store and a cache of 100, real TLS clients get each host's
// own certificate, the cache never holds more than its bound, and a host
// pushed out of memory is served again from the store.
func TestCertificatesLoadLazilyWithBoundedCache(t *testing.T) {
	h := storeWithManyHosts(t)
	m, err := New(Config{Store: h.st, Seal: h.seal, CacheSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, m.TLSConfig())
	roots := h.ca.pool()
	if m.Cached() != 0 {
		t.Fatalf("%d certificates in memory before any handshake", m.Cached())
	}
	// 300 distinct hosts spread over the 10,000, then the first again.
	for i := 0; i < manyCount; i += manyCount / 300 {
		host := h.hosts[i]
		st := handshake(t, addr, host, roots)
		if got := st.PeerCertificates[0].DNSNames; len(got) != 1 || got[0] != host {
			t.Fatalf("asked for %s, got a certificate for %v", host, got)
		}
		if n := m.Cached(); n > 100 {
			t.Fatalf("%d certificates in memory, bound 100", n)
		}
	}
	if m.Cached() != 100 {
		t.Fatalf("%d certificates in memory after 300 hosts, want the bound, 100", m.Cached())
	}
	if got := handshake(t, addr, h.hosts[0], roots).PeerCertificates[0].DNSNames[0]; got != h.hosts[0] {
		t.Fatalf("an evicted host got a certificate for %s", got)
	}
	// A host with no certificate, and no default: the handshake fails.
	d := &tls.Dialer{Config: &tls.Config{ServerName: "absent.many.example", RootCAs: roots, MinVersion: tls.VersionTLS12}}
	if c, err := d.DialContext(context.Background(), "tcp", addr); err == nil {
		_ = c.Close()
		t.Fatal("a host with no certificate got one")
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	t.Logf("heap in use with %d hosts stored, %d in memory: %d KiB (figures: BenchmarkCertificateMemory)", manyCount, m.Cached(), ms.HeapInuse>>10)
}

// TestCertificatePolicyAndDefault: a host the policy refuses is never
// looked up, and gets the default certificate when there is one; a
// wildcard in the store serves the names under it.
func TestCertificatePolicyAndDefault(t *testing.T) {
	st, _ := openStore(t)
	ca := newTestCA(t)
	def := ca.certificate(t, "default.example", "")
	refused := errors.New("not served")
	m, err := New(Config{Store: st, Seal: testSealer(t), Default: &def,
		HostPolicy: func(_ context.Context, host string) error {
			if host == "refused.example" || host == "stored-but-refused.example" {
				return refused
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"stored-but-refused.example", "*.wild.example"} {
		chain, key, _ := ca.issue(t, host, "", time.Now().Add(time.Hour))
		if err := m.Put(host, chain, key, false); err != nil {
			t.Fatal(err)
		}
	}
	addr := serveTLS(t, m.TLSConfig())
	cn := func(host string) string {
		d := &tls.Dialer{Config: &tls.Config{ServerName: host, InsecureSkipVerify: true}} //nolint:gosec // the test reads which certificate is served
		c, err := d.DialContext(context.Background(), "tcp", addr)
		if err != nil {
			t.Fatalf("TLS for %s: %v", host, err)
		}
		defer c.Close()
		return c.(*tls.Conn).ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	for host, want := range map[string]string{
		"refused.example":            "default.example",
		"stored-but-refused.example": "default.example",
		"unknown.example":            "default.example",
		"a.wild.example":             "*.wild.example",
	} {
		if got := cn(host); got != want {
			t.Errorf("%s: served %s, want %s", host, got, want)
		}
	}
}
