package streams

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
)

// ErrFingerprint: the edge's certificate is not the one the session named.
var ErrFingerprint = errors.New("streams: the edge's certificate does not match the pinned fingerprint")

// Dial is the agent's side: it connects to the edge at addr, checks that
// the edge's certificate has the pinned fingerprint and presents token.
// The connection it returns carries the public connection's bytes.
func Dial(ctx context.Context, addr, fingerprint, token string) (*Conn, error) {
	if len(token) != TokenLen {
		return nil, fmt.Errorf("streams: a token is %d characters, got %d", TokenLen, len(token))
	}
	if fingerprint == "" {
		return nil, errors.New("streams: no fingerprint to pin")
	}
	cfg := &tls.Config{
		MinVersion:                  tls.VersionTLS13,
		DynamicRecordSizingDisabled: fullRecords,
		// Verification is the pin below, not a CA chain: the certificate
		// is self-signed and its fingerprint came over the
		// authenticated SSH session.
		InsecureSkipVerify: true, //nolint:gosec // pinned in VerifyPeerCertificate
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || Fingerprint(raw[0]) != fingerprint {
				return ErrFingerprint
			}
			return nil
		},
	}
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("streams: dialing %s: %w", addr, err)
	}
	c := newConn(raw, func(c net.Conn) *tls.Conn { return tls.Client(c, cfg) })
	if err := c.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("streams: TLS handshake with %s: %w", addr, err)
	}
	if _, err := c.Write([]byte(token)); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("streams: sending the token to %s: %w", addr, err)
	}
	return c, nil
}
