// Package keys defines the format of the edge's secrets: API keys
// (tuna_<id>_<secret>) and tunnel keys (tunt_<id>_<secret>). The id is public
// and indexes the store; only a SHA-256 hash of the whole key is stored, so a
// leaked database does not leak usable credentials.
package keys

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Kind tells which of the two key families a key belongs to.
type Kind string

const (
	// KindAPI is an API key: it calls the control API (and, with scope
	// tunnels:connect, opens tunnels).
	KindAPI Kind = "tuna"
	// KindTunnel is a per-tunnel key: it only opens one SSH tunnel.
	KindTunnel Kind = "tunt"
)

// Scopes an API key can hold. They match edge/client's constants.
const (
	ScopeWrite        = "tunnels:write"
	ScopeConnect      = "tunnels:connect"
	ScopeFull         = "full"
	ScopeSecretsRead  = "secrets:read"
	ScopeSecretsWrite = "secrets:write"
)

// Scopes lists every scope, in the order error messages name them.
var Scopes = []string{ScopeWrite, ScopeConnect, ScopeSecretsRead, ScopeSecretsWrite, ScopeFull}

// ValidScope reports whether s is a known scope.
func ValidScope(s string) bool {
	return slices.Contains(Scopes, s)
}

// ScopeList renders Scopes for error messages: "a", "b" or "c".
func ScopeList() string {
	q := make([]string, len(Scopes))
	for i, s := range Scopes {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// idBytes and secretBytes size the random parts: 64 bits is plenty for a
// lookup id, 160 bits of secret makes guessing hopeless.
const (
	idBytes     = 8
	secretBytes = 20
)

// secretEncoding is lowercase base32 without padding: no "_" (our separator),
// no characters that need quoting in shells, URLs or YAML.
var secretEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// ErrMalformed is returned by Parse for anything not shaped like a key.
var ErrMalformed = errors.New("malformed key")

// Key is a parsed key.
type Key struct {
	Kind   Kind
	ID     string
	Secret string
}

// String renders the key as the user sees it.
func (k Key) String() string { return string(k.Kind) + "_" + k.ID + "_" + k.Secret }

// Hash is what the store keeps instead of the secret.
func (k Key) Hash() []byte { return Hash(k.String()) }

// New makes a fresh random key of the given kind.
func New(kind Kind) (Key, error) {
	id := make([]byte, idBytes)
	sec := make([]byte, secretBytes)
	if _, err := rand.Read(id); err != nil {
		return Key{}, fmt.Errorf("generating key id: %w", err)
	}
	if _, err := rand.Read(sec); err != nil {
		return Key{}, fmt.Errorf("generating key secret: %w", err)
	}
	return Key{Kind: kind, ID: hex.EncodeToString(id), Secret: secretEncoding.EncodeToString(sec)}, nil
}

// Parse splits a presented key into its parts without touching the store.
func Parse(s string) (Key, error) {
	parts := strings.Split(s, "_")
	if len(parts) != 3 {
		return Key{}, ErrMalformed
	}
	kind := Kind(parts[0])
	if kind != KindAPI && kind != KindTunnel {
		return Key{}, ErrMalformed
	}
	if len(parts[1]) != 2*idBytes || !isHex(parts[1]) || parts[2] == "" {
		return Key{}, ErrMalformed
	}
	return Key{Kind: kind, ID: parts[1], Secret: parts[2]}, nil
}

// Hash returns SHA-256 of a whole key string.
func Hash(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// Matches compares a presented key with a stored hash in constant time, so
// response timing reveals nothing about how much of a guess was right.
func Matches(k Key, storedHash []byte) bool {
	return subtle.ConstantTimeCompare(k.Hash(), storedHash) == 1
}

func isHex(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// RandomToken returns n random bytes hex-encoded: DNS challenge tokens and
// session ids.
func RandomToken(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		// crypto/rand never fails on supported platforms (Go 1.24+ panics
		// itself rather than return an error); keep the guard explicit.
		panic("keys: crypto/rand: " + err.Error())
	}
	return hex.EncodeToString(b)
}
