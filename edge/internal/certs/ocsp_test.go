package certs

import (
	"crypto"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ocsp"
)

// ocspResponder is a real OCSP responder on loopback, signing with the test
// CA's key; the test sets what it answers.
type ocspResponder struct {
	srv      *httptest.Server
	ca       *testCA
	requests atomic.Int64

	mu     sync.Mutex
	status int
	this   time.Time
	next   time.Time
	signer *testCA // nil: the CA itself; else its certificate goes in the answer
}

func startOCSPResponder(t *testing.T, ca *testCA) *ocspResponder {
	t.Helper()
	r := &ocspResponder{ca: ca, status: ocsp.Good}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		q, err := ocsp.ParseRequest(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		tmpl := ocsp.Response{Status: r.status, SerialNumber: q.SerialNumber, ThisUpdate: r.this, NextUpdate: r.next}
		if r.status == ocsp.Revoked {
			tmpl.RevokedAt = r.this
		}
		signer := r.ca
		if r.signer != nil {
			// A responder other than the CA sends its certificate along,
			// for the client to check that the CA delegated to it.
			signer, tmpl.Certificate = r.signer, r.signer.cert
		}
		r.mu.Unlock()
		der, err := ocsp.CreateResponse(r.ca.cert, signer.cert, tmpl, crypto.Signer(signer.key))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/ocsp-response")
		_, _ = w.Write(der)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *ocspResponder) answer(status int, this, next time.Time, signer *testCA) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status, r.this, r.next, r.signer = status, this, next, signer
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOCSPStapling: a certificate naming an OCSP responder gets the
// responder's good answer stapled, fetched again halfway to its
// NextUpdate; a bad answer (revoked, signed by another CA, expired) is
// never stapled, and a staple whose NextUpdate passed is no longer served.
func TestOCSPStapling(t *testing.T) {
	st, _ := openStore(t)
	ca := newTestCA(t)
	resp := startOCSPResponder(t, ca)
	clock := &fakeClock{now: time.Now()}
	m, err := New(Config{Store: st, Seal: testSealer(t), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	chain, key, leaf := ca.issue(t, "stapled.example", resp.srv.URL, time.Now().Add(24*time.Hour))
	if err := m.Put("stapled.example", chain, key, false); err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, m.TLSConfig())
	roots := ca.pool()
	staple := func() *ocsp.Response {
		t.Helper()
		raw := handshake(t, addr, "stapled.example", roots).OCSPResponse
		if raw == nil {
			return nil
		}
		r, err := ocsp.ParseResponseForCert(raw, leaf, ca.cert)
		if err != nil {
			t.Fatalf("the staple served does not parse for the certificate: %v", err)
		}
		return r
	}

	now := clock.Now()
	resp.answer(ocsp.Good, now.Add(-time.Minute), now.Add(time.Hour), nil)
	var first *ocsp.Response
	waitUntil(t, "a staple", func() bool { first = staple(); return first != nil })
	if first.Status != ocsp.Good {
		t.Fatalf("stapled status %d, want good", first.Status)
	}
	fetched := resp.requests.Load()

	// Before the halfway mark nothing is fetched; after it, a new one.
	clock.Advance(20 * time.Minute)
	staple()
	if n := resp.requests.Load(); n != fetched {
		t.Fatalf("%d fetches before the refresh was due, want %d", n, fetched)
	}
	clock.Advance(15 * time.Minute)
	now = clock.Now()
	resp.answer(ocsp.Good, now.Add(-time.Minute), now.Add(time.Hour), nil)
	waitUntil(t, "a refreshed staple", func() bool {
		s := staple()
		return s != nil && s.ThisUpdate.After(first.ThisUpdate)
	})

	// awaitFetch waits for a fetch after the responder had n requests, and
	// for it to end: a fetch reads the clock when its answer is in, so the
	// test moves the clock only after that, or the next fetch would be
	// due later than the test means.
	awaitFetch := func(what string, n int64) {
		t.Helper()
		waitUntil(t, what, func() bool { staple(); return resp.requests.Load() > n })
		waitUntil(t, "the fetch to end", func() bool { return !m.cached("stapled.example").busy.Load() })
	}

	// The responder now says revoked: the good staple stays until its
	// NextUpdate, then the certificate goes out bare, never with the
	// revoked answer.
	resp.answer(ocsp.Revoked, now, now.Add(2*time.Hour), nil)
	clock.Advance(31 * time.Minute)
	before := resp.requests.Load()
	awaitFetch("a fetch of the revoked answer", before)
	if s := staple(); s == nil || s.Status != ocsp.Good {
		t.Fatalf("after a revoked answer, within the good staple's window: %v; want the good staple", s)
	}
	clock.Advance(30 * time.Minute) // past the good staple's NextUpdate
	if s := staple(); s != nil {
		t.Fatalf("a staple past its NextUpdate (status %d, next %s) was served", s.Status, s.NextUpdate)
	}
	awaitFetch("another fetch", before+1)
	if s := staple(); s != nil {
		t.Fatalf("a revoked answer was stapled (status %d)", s.Status)
	}

	// Answers that are good but not trustworthy or not current are not
	// stapled either. The CA's other certificates (another site's, whose
	// holder could sign a good answer for a revoked certificate) and a
	// lapsed responder are no responders the CA delegated to.
	other := newTestCA(t)
	wall := time.Now()
	ocspSigning := []x509.ExtKeyUsage{x509.ExtKeyUsageOCSPSigning}
	site := ca.delegate(t, "another site", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, wall.Add(-time.Hour), wall.Add(48*time.Hour))
	lapsed := ca.delegate(t, "lapsed responder", ocspSigning, wall.Add(-2*time.Hour), wall.Add(-time.Hour))
	for name, bad := range map[string]func(now time.Time){
		"signed by another CA":                 func(now time.Time) { resp.answer(ocsp.Good, now, now.Add(time.Hour), other) },
		"signed by another site's certificate": func(now time.Time) { resp.answer(ocsp.Good, now, now.Add(time.Hour), site) },
		"signed by a lapsed responder":         func(now time.Time) { resp.answer(ocsp.Good, now, now.Add(time.Hour), lapsed) },
		"expired":                              func(now time.Time) { resp.answer(ocsp.Good, now.Add(-2*time.Hour), now.Add(-time.Hour), nil) },
		"from the future":                      func(now time.Time) { resp.answer(ocsp.Good, now.Add(time.Hour), now.Add(2*time.Hour), nil) },
	} {
		clock.Advance(ocspRetry + time.Second)
		bad(clock.Now())
		awaitFetch("a fetch of the answer "+name, resp.requests.Load())
		if s := staple(); s != nil {
			t.Fatalf("an answer %s was stapled", name)
		}
	}

	// A responder the CA delegated to, with its certificate in the
	// answer: stapled.
	delegated := ca.delegate(t, "delegated responder", ocspSigning, wall.Add(-time.Hour), wall.Add(48*time.Hour))
	clock.Advance(ocspRetry + time.Second)
	now = clock.Now()
	resp.answer(ocsp.Good, now.Add(-time.Minute), now.Add(time.Hour), delegated)
	awaitFetch("a fetch of the delegated responder's answer", resp.requests.Load())
	if s := staple(); s == nil || s.Status != ocsp.Good || s.Certificate == nil || !s.Certificate.Equal(delegated.cert) {
		t.Fatalf("the delegated responder's good answer: stapled %+v", s)
	}
}

// TestOCSPStaplingOfTheDefaultCertificate: the certificate served for
// names the store has none for (--tls-cert-file) is stapled too.
func TestOCSPStaplingOfTheDefaultCertificate(t *testing.T) {
	st, _ := openStore(t)
	ca := newTestCA(t)
	resp := startOCSPResponder(t, ca)
	now := time.Now()
	resp.answer(ocsp.Good, now.Add(-time.Minute), now.Add(time.Hour), nil)
	def := ca.certificate(t, "default.example", resp.srv.URL)
	m, err := New(Config{Store: st, Seal: testSealer(t), Default: &def})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, m.TLSConfig())
	waitUntil(t, "a staple on the default certificate", func() bool {
		raw := handshake(t, addr, "default.example", ca.pool()).OCSPResponse
		if raw == nil {
			return false
		}
		r, err := ocsp.ParseResponseForCert(raw, def.Leaf, ca.cert)
		if err != nil || r.Status != ocsp.Good {
			t.Fatalf("the staple on the default certificate: %v, %v", r, err)
		}
		return true
	})
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }
