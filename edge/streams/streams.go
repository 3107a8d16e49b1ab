// Package streams carries a tunnel's TCP connections outside its SSH
// session, each on a TLS connection of its own that the agent dials to the
// edge, so bulk data pays one AES-GCM pass per hop and no SSH packet path.
//
// The SSH session stays the root of trust. The edge sends the agent, over
// the session, a one-time token for each public connection; the agent dials
// the edge's SSH address, checks that the edge's TLS certificate is the one
// whose SHA-256 the session's bind reply named, and writes the token. The
// edge hands the connection to whoever waits for that token. A token is 32
// random bytes, lives until its public connection is served or given up,
// and works once; a connection with another token is closed. So a stream
// reaches only the session that asked for it, and only the pinned edge.
//
// The edge tells the two kinds of connection on its SSH port apart by
// their first byte: a TLS handshake starts with 0x16, an SSH client with
// "SSH-".
package streams

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"math/big"
	"time"
)

// TokenLen is the length of a token on the wire: 32 bytes, hex.
const TokenLen = 64

// HandshakeByte is the first byte of every TLS connection (a handshake
// record).
const HandshakeByte = 0x16

// NewToken returns a fresh random token.
func NewToken() string {
	b := make([]byte, TokenLen/2)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return hex.EncodeToString(b)
}

// Fingerprint is the hex SHA-256 of a certificate's DER form, the value an
// agent pins.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
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
