package streams

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// ErrUnknownToken: a stream connection named a token nobody waits for.
var ErrUnknownToken = errors.New("streams: unknown or used token")

// Hub is the edge's side: it holds the certificate and matches arriving
// stream connections to the public connections that wait for them.
type Hub struct {
	cfg         *tls.Config
	fingerprint string

	mu      sync.Mutex
	waiting map[string]chan *Conn
}

// NewHub makes a hub with a fresh certificate.
func NewHub() (*Hub, error) {
	cert, err := newCertificate()
	if err != nil {
		return nil, err
	}
	return &Hub{
		cfg: &tls.Config{
			Certificates: []tls.Certificate{cert},
			MinVersion:   tls.VersionTLS13,
			// Full records from the first byte: see fullRecords.
			DynamicRecordSizingDisabled: fullRecords,
		},
		fingerprint: Fingerprint(cert.Certificate[0]),
		waiting:     map[string]chan *Conn{},
	}, nil
}

// Fingerprint is what the bind reply tells agents to pin.
func (h *Hub) Fingerprint() string { return h.fingerprint }

// Expect registers a fresh token. Its connection arrives on the returned
// channel, at most once; call cancel when done waiting, after which a late
// connection with the token is closed.
func (h *Hub) Expect() (token string, conn <-chan *Conn, cancel func()) {
	token = NewToken()
	ch := make(chan *Conn, 1)
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
	sc := newConn(raw, func(c net.Conn) *tls.Conn { return tls.Server(c, h.cfg) })
	c := sc.Conn
	if err := c.Handshake(); err != nil {
		_ = raw.Close()
		return fmt.Errorf("streams: TLS handshake: %w", err)
	}
	var tok [TokenLen]byte
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
