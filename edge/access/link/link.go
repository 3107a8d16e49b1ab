// Package link is the format of the shareable links of an access policy:
// a token that names a host, a path, an expiry and an optional number of
// uses, signed with the policy's links key (HMAC-SHA256). The CLI makes
// links with the key it reads from the cluster; the edge checks them. It
// has no dependencies, so the CLI does not carry the edge's.
package link

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Path is where the edge redeems a link on the host it names.
const Path = "/.tuna/link"

// MinKeySize is the shortest links key accepted: 32 bytes.
const MinKeySize = 32

// Link is what a token grants: the paths under Path on Host until
// Expires, Uses times at most (0: no limit).
type Link struct {
	ID      string    `json:"id"`
	Host    string    `json:"host"`
	Path    string    `json:"path"`
	Expires time.Time `json:"exp"`
	Uses    int       `json:"uses,omitempty"`
}

// domain separates a link's MAC from any other use of the key.
const domain = "tuna-link v1\x00"

var enc = base64.RawURLEncoding

// KeyID names a links key without revealing it: 8 hex digits of its
// SHA-256.
func KeyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:4])
}

// CheckKey refuses a key too short to sign with.
func CheckKey(key []byte) error {
	if len(key) < MinKeySize {
		return fmt.Errorf("a links key needs at least %d bytes, this one has %d: make one with `openssl rand -base64 32`", MinKeySize, len(key))
	}
	return nil
}

// Sign returns the token of l, with a new random ID when l has none.
func Sign(key []byte, l Link) (string, Link, error) {
	if err := CheckKey(key); err != nil {
		return "", l, err
	}
	if l.ID == "" {
		b := make([]byte, 9)
		if _, err := rand.Read(b); err != nil {
			return "", l, err
		}
		l.ID = enc.EncodeToString(b)
	}
	if err := l.check(); err != nil {
		return "", l, err
	}
	l.Expires = l.Expires.UTC().Truncate(time.Second)
	payload, err := json.Marshal(l)
	if err != nil {
		return "", l, err
	}
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(mac(key, payload)), l, nil
}

// URL is the address that redeems token on l's host over scheme.
func URL(scheme string, l Link, token string) string {
	return scheme + "://" + l.Host + Path + "?" + url.Values{"t": {token}}.Encode()
}

func (l Link) check() error {
	switch {
	case l.Host == "":
		return errors.New("a link needs the host it opens")
	case !strings.HasPrefix(l.Path, "/") || strings.HasPrefix(l.Path, "//"):
		return fmt.Errorf("a link's path must start with a single '/', got %q", l.Path)
	case l.Expires.IsZero():
		return errors.New("a link needs an expiry")
	case l.Uses < 0:
		return errors.New("a link's number of uses cannot be negative")
	}
	return nil
}

// ErrInvalid is a token that is malformed or not signed by any key tried.
var ErrInvalid = errors.New("the link is not valid: it was changed, or not made for this address")

// Verify returns the link a token grants, when one of keys signed it,
// with the index of that key. Expiry and uses are the caller's to check.
func Verify(token string, keys [][]byte) (Link, int, error) {
	p, s, ok := strings.Cut(token, ".")
	if !ok {
		return Link{}, -1, ErrInvalid
	}
	payload, err := enc.DecodeString(p)
	if err != nil {
		return Link{}, -1, ErrInvalid
	}
	sig, err := enc.DecodeString(s)
	if err != nil {
		return Link{}, -1, ErrInvalid
	}
	for i, k := range keys {
		if hmac.Equal(sig, mac(k, payload)) {
			var l Link
			if json.Unmarshal(payload, &l) != nil || l.check() != nil {
				return Link{}, -1, ErrInvalid
			}
			return l, i, nil
		}
	}
	return Link{}, -1, ErrInvalid
}

func mac(key, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(domain))
	m.Write(payload)
	return m.Sum(nil)
}
