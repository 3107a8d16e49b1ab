// Package keyhash is the server's side of the edge's keys (their format is
// edge/keys): minting a key, and the SHA-256 hash of the whole key that the
// store keeps instead of its secret, so a leaked database does not leak
// usable credentials.
package keyhash

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"fmt"

	"code.tuna.am/tuna/k8s-operator/edge/keys"
)

// secretBytes sizes a key's secret: 160 bits makes guessing hopeless.
const secretBytes = 20

// secretEncoding is lowercase base32 without padding: no "_" (the format's
// separator), no characters that need quoting in shells, URLs or YAML.
var secretEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// New makes a fresh random key of the given kind.
func New(kind keys.Kind) (keys.Key, error) {
	id := make([]byte, keys.IDBytes)
	sec := make([]byte, secretBytes)
	if _, err := rand.Read(id); err != nil {
		return keys.Key{}, fmt.Errorf("generating key id: %w", err)
	}
	if _, err := rand.Read(sec); err != nil {
		return keys.Key{}, fmt.Errorf("generating key secret: %w", err)
	}
	return keys.Key{Kind: kind, ID: hex.EncodeToString(id), Secret: secretEncoding.EncodeToString(sec)}, nil
}

// Of is what the store keeps instead of k's secret.
func Of(k keys.Key) []byte { return Hash(k.String()) }

// Hash returns SHA-256 of a whole key string.
func Hash(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// Matches compares a presented key with a stored hash in constant time, so
// response timing reveals nothing about how much of a guess was right.
func Matches(k keys.Key, storedHash []byte) bool {
	return subtle.ConstantTimeCompare(Of(k), storedHash) == 1
}

// RandomToken returns n random bytes hex-encoded: DNS challenge tokens,
// request and session ids.
func RandomToken(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		// crypto/rand never fails on supported platforms (Go 1.24+ panics
		// itself rather than return an error); keep the guard explicit.
		panic("keyhash: crypto/rand: " + err.Error())
	}
	return hex.EncodeToString(b)
}
