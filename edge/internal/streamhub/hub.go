// Package streamhub is the edge's side of streams (edge/streams): the
// certificate agents pin, the one-time tokens that public connections wait
// with, and the matching of each arriving stream connection to the public
// connection that waits for its token.
package streamhub

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"sync"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/streams"
)

// ErrUnknownToken: a stream connection named a token nobody waits for.
var ErrUnknownToken = errors.New("streams: unknown or used token")

// Hub is the edge's side: it holds the certificate and matches arriving
// stream connections to the public connections that wait for them.
type Hub struct {
	cfg         *tls.Config
	fingerprint string

	mu      sync.Mutex
	waiting map[string]chan *streams.Conn
}

// NewHub makes a hub with a fresh certificate.
func NewHub() (*Hub, error) {
	cert, err := newCertificate()
	if err != nil {
		return nil, err
	}
	return &Hub{
		cfg:         streams.ServerConfig(cert),
		fingerprint: streams.Fingerprint(cert.Certificate[0]),
		waiting:     map[string]chan *streams.Conn{},
	}, nil
}

// Fingerprint is what the bind reply tells agents to pin.
func (h *Hub) Fingerprint() string { return h.fingerprint }

// Expect registers a fresh token. Its connection arrives on the returned
// channel, at most once; call cancel when done waiting, after which a late
// connection with the token is closed.
func (h *Hub) Expect() (token string, conn <-chan *streams.Conn, cancel func()) {
	token = NewToken()
	ch := make(chan *streams.Conn, 1)
	h.mu.Lock()
	h.waiting[token] = ch
	h.mu.Unlock()
	cancel = func() {
		h.mu.Lock()
		delete(h.waiting, token)
		h.mu.Unlock()
		// A connection delivered but not taken is nobody's now.
		select {
		case c := <-ch:
			_ = c.Close()
		default:
		}
	}
	return token, ch, cancel
}

// Serve finishes the TLS handshake of a stream connection and reads its
// token within timeout, then hands it to the public connection waiting for
// that token. It closes the connection on any failure and returns why.
func (h *Hub) Serve(raw net.Conn, timeout time.Duration) error {
	_ = raw.SetDeadline(time.Now().Add(timeout))
	sc := streams.Server(raw, h.cfg)
	c := sc.Conn
	if err := c.Handshake(); err != nil {
		_ = raw.Close()
		return fmt.Errorf("streams: TLS handshake: %w", err)
	}
	var tok [streams.TokenLen]byte
	if _, err := io.ReadFull(c, tok[:]); err != nil {
		_ = c.Close()
		return fmt.Errorf("streams: reading the token: %w", err)
	}
	_ = raw.SetDeadline(time.Time{})
	h.mu.Lock()
	ch, ok := h.waiting[string(tok[:])]
	delete(h.waiting, string(tok[:]))
	h.mu.Unlock()
	if !ok {
		_ = c.Close()
		return ErrUnknownToken
	}
	ch <- sc // buffered, and only this Serve took the token
	return nil
}

// Waiting is how many tokens wait for their connection (for tests).
func (h *Hub) Waiting() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.waiting)
}

// NewToken returns a fresh random token.
func NewToken() string {
	b := make([]byte, streams.TokenLen/2)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return hex.EncodeToString(b)
}

// newCertificate makes the edge's stream certificate: self-signed and
// short-lived, because nobody verifies it through a CA, only by the
// fingerprint the session hands out; a restarted edge makes a new one.
func newCertificate() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("streams: generating a key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("streams: generating a serial: %w", err)
	}
	now := time.Now()
	tpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "tuna-edge streams"},
		NotBefore:    now.Add(-time.Hour),
		// A node runs for months between restarts; the date is not what
		// the agent checks.
		NotAfter:    now.AddDate(10, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("streams: creating the certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
