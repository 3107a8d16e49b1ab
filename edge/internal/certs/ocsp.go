package certs

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"golang.org/x/crypto/ocsp"
)

// OCSP stapling: when a certificate names an OCSP responder, the node
// fetches the responder's answer for it in the background and staples it
// to its handshakes. A staple is served only while it is valid: a good
// status, signed for this certificate by its issuer (or a responder the
// issuer delegated to), between its ThisUpdate and NextUpdate. It is
// fetched again halfway through that window; a failed fetch keeps the
// staple it replaces until that one's NextUpdate, then the certificate
// goes out without one. Each node fetches its own: staples are not in the
// store.

// ocspRetry is the wait after a failed fetch.
const ocspRetry = 5 * time.Minute

// ocspSkew tolerates a responder whose clock is slightly ahead.
const ocspSkew = 5 * time.Minute

// maxOCSPResponse bounds a responder's answer.
const maxOCSPResponse = 64 << 10

// ocspUpkeep drops a lapsed staple at once and starts a fetch when due.
func (m *Manager) ocspUpkeep(e *entry, now time.Time) {
	if len(e.leaf.OCSPServer) == 0 || e.issuer == nil {
		return
	}
	e.ocspMu.Lock()
	lapsed := !e.ocspUntil.IsZero() && !now.Before(e.ocspUntil)
	due := !now.Before(e.ocspNext)
	if lapsed {
		e.ocspUntil = time.Time{}
	}
	e.ocspMu.Unlock()
	if lapsed {
		m.staple(e, nil)
		m.cfg.Logger.Warn("OCSP staple expired before a new one was fetched; serving without", "host", e.name)
	}
	if due && e.busy.CompareAndSwap(false, true) {
		go m.fetchOCSP(e)
	}
}

// staple swaps e's served certificate for one with staple (nil: none).
func (m *Manager) staple(e *entry, staple []byte) {
	c := *e.served.Load()
	c.OCSPStaple = staple
	e.served.Store(&c)
}

func (m *Manager) fetchOCSP(e *entry) {
	defer e.busy.Store(false)
	der, until, err := m.ocspResponse(e)
	now := m.cfg.Now()
	e.ocspMu.Lock()
	defer e.ocspMu.Unlock()
	if err != nil {
		e.ocspNext = now.Add(ocspRetry)
		m.cfg.Logger.Warn("OCSP: no staple fetched; retrying later", "host", e.name, "responder", e.leaf.OCSPServer[0], "err", err, "retry_in", ocspRetry)
		return
	}
	e.ocspUntil = until.next
	e.ocspNext = until.this.Add(until.next.Sub(until.this) / 2)
	m.staple(e, der)
}

type ocspWindow struct{ this, next time.Time }

// ocspResponse fetches and checks e's OCSP response.
func (m *Manager) ocspResponse(e *entry) ([]byte, ocspWindow, error) {
	req, err := ocsp.CreateRequest(e.leaf, e.issuer, nil)
	if err != nil {
		return nil, ocspWindow{}, err
	}
	resp, err := m.cfg.OCSPClient.Post(e.leaf.OCSPServer[0], "application/ocsp-request", bytes.NewReader(req))
	if err != nil {
		return nil, ocspWindow{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, ocspWindow{}, fmt.Errorf("responder answered %s", resp.Status)
	}
	der, err := io.ReadAll(io.LimitReader(resp.Body, maxOCSPResponse+1))
	if err != nil {
		return nil, ocspWindow{}, err
	}
	if len(der) > maxOCSPResponse {
		return nil, ocspWindow{}, fmt.Errorf("response larger than %d bytes", maxOCSPResponse)
	}
	r, err := ocsp.ParseResponseForCert(der, e.leaf, e.issuer)
	if err != nil {
		return nil, ocspWindow{}, err
	}
	now := m.cfg.Now()
	if err := responderDelegated(r.Certificate, e.issuer, now); err != nil {
		return nil, ocspWindow{}, err
	}
	switch {
	case r.Status != ocsp.Good:
		return nil, ocspWindow{}, fmt.Errorf("the certificate's status is %s", ocspStatus(r.Status))
	case r.NextUpdate.IsZero():
		return nil, ocspWindow{}, fmt.Errorf("the response has no NextUpdate")
	case now.Add(ocspSkew).Before(r.ThisUpdate):
		return nil, ocspWindow{}, fmt.Errorf("the response is from the future (ThisUpdate %s)", r.ThisUpdate.Format(time.RFC3339))
	case !now.Before(r.NextUpdate):
		return nil, ocspWindow{}, fmt.Errorf("the response expired at %s", r.NextUpdate.Format(time.RFC3339))
	}
	return der, ocspWindow{this: r.ThisUpdate, next: r.NextUpdate}, nil
}

// responderDelegated checks the certificate that signed an answer, when
// the answer carries one (RFC 6960, 4.2.2.2): the issuer itself, or a
// certificate the issuer made for signing OCSP answers
// (id-kp-OCSPSigning), valid at now. x/crypto/ocsp checks only that the
// issuer signed it, and any certificate of the same CA would pass that,
// another site's included: whoever holds its key could then sign a good
// answer for a revoked certificate, on a fetch that is plain HTTP.
func responderDelegated(signer, issuer *x509.Certificate, now time.Time) error {
	if signer == nil || signer.Equal(issuer) {
		return nil
	}
	if !slices.Contains(signer.ExtKeyUsage, x509.ExtKeyUsageOCSPSigning) {
		return fmt.Errorf("the response is signed by %q, which its issuer did not delegate OCSP signing to (no OCSPSigning extended key usage)", signer.Subject)
	}
	if now.Before(signer.NotBefore) || now.After(signer.NotAfter) {
		return fmt.Errorf("the response is signed by %q, whose certificate is not valid now (%s to %s)", signer.Subject,
			signer.NotBefore.Format(time.RFC3339), signer.NotAfter.Format(time.RFC3339))
	}
	return nil
}

func ocspStatus(s int) string {
	switch s {
	case ocsp.Revoked:
		return "revoked"
	case ocsp.Unknown:
		return "unknown"
	}
	return fmt.Sprintf("%d", s)
}
