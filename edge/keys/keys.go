// Package keys defines the format of the edge's keys, as clients present
// them: API keys (tuna_<id>_<secret>) and tunnel keys (tunt_<id>_<secret>).
// The id is public and indexes the store. Minting keys and the hash the
// store keeps instead of them are the server's (edge/internal/keyhash).
package keys

import (
	"errors"
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

// IDBytes is the size of a key's random id, written as twice as many hex
// digits: 64 bits is plenty for a lookup id.
const IDBytes = 8

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
	if len(parts[1]) != 2*IDBytes || !isHex(parts[1]) || parts[2] == "" {
		return Key{}, ErrMalformed
	}
	return Key{Kind: kind, ID: parts[1], Secret: parts[2]}, nil
}

func isHex(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
