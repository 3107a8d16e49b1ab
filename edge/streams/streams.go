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
//
// This package is what both ends share (the stream connection, its TLS
// settings, tokens and fingerprints on the wire) and the agent's side
// (Dial); the edge's side, its certificate and the tokens it waits for, is
// edge/internal/streamhub.
package streams

import (
	"crypto/sha256"
	"encoding/hex"
)

// TokenLen is the length of a token on the wire: 32 bytes, hex.
const TokenLen = 64

// HandshakeByte is the first byte of every TLS connection (a handshake
// record).
const HandshakeByte = 0x16

// Fingerprint is the hex SHA-256 of a certificate's DER form, the value an
// agent pins.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}
