// Package auth turns a presented secret into a Principal and answers the
// two questions the edge asks of it: may it call this API route, and may it
// open a tunnel. Keeping the rules here keeps the API and SSH server from
// disagreeing about them.
package auth

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/keyhash"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
	"code.tuna.am/tuna/k8s-operator/edge/keys"
)

// ErrInvalidKey is returned for unknown, malformed or revoked keys. One error
// for all three, so a caller cannot probe which ids exist.
var ErrInvalidKey = errors.New("invalid or revoked key")

// ExpiredError is a tunnel key whose expiry passed without a renewal. It is
// returned only to a caller that presented the key's secret.
type ExpiredError struct {
	ID string
	At time.Time
}

func (e *ExpiredError) Error() string {
	return fmt.Sprintf("tunnel key %s expired at %s without renewal; the operator renews its keys well before they expire, so check that its controller runs, or issue a new key",
		e.ID, e.At.UTC().Format(time.RFC3339))
}

// Principal is an authenticated caller.
type Principal struct {
	Kind keys.Kind
	// ID is the key id (the public middle part of the key).
	ID     string
	Name   string
	Scopes []string
	// SecretPrefix confines the secrets scopes to names starting with it.
	SecretPrefix string
	// OwnerPrefix binds the key to the owners under it (store.UnderPrefix).
	OwnerPrefix string
	// Tunnel is set for tunnel keys.
	Tunnel *store.TunnelKey
}

// Has reports whether the principal holds scope (full implies every scope
// except that it is still an API key).
func (p *Principal) Has(scope string) bool {
	return slices.Contains(p.Scopes, scope) || slices.Contains(p.Scopes, apiwire.ScopeFull)
}

// MaySeeSecret reports whether name lies within the principal's secret
// prefix (every name when it has none).
func (p *Principal) MaySeeSecret(name string) bool {
	return strings.HasPrefix(name, p.SecretPrefix)
}

// Store is what auth needs of the store.
type Store interface {
	GetAPIKey(id string) (store.APIKey, error)
	GetTunnelKey(id string) (store.TunnelKey, error)
}

// Authenticate checks a presented key against the store.
func Authenticate(st Store, secret string) (*Principal, error) {
	k, err := keys.Parse(secret)
	if err != nil {
		return nil, ErrInvalidKey
	}
	switch k.Kind {
	case keys.KindAPI:
		rec, err := st.GetAPIKey(k.ID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, ErrInvalidKey
		}
		if err != nil {
			return nil, fmt.Errorf("looking up API key: %w", err)
		}
		if !keyhash.Matches(k, rec.Hash) {
			return nil, ErrInvalidKey
		}
		return &Principal{Kind: keys.KindAPI, ID: rec.ID, Name: rec.Name, Scopes: rec.Scopes,
			SecretPrefix: rec.SecretPrefix, OwnerPrefix: rec.OwnerPrefix}, nil
	case keys.KindTunnel:
		rec, err := st.GetTunnelKey(k.ID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, ErrInvalidKey
		}
		if err != nil {
			return nil, fmt.Errorf("looking up tunnel key: %w", err)
		}
		if !keyhash.Matches(k, rec.Hash) {
			return nil, ErrInvalidKey
		}
		if rec.Expired(time.Now()) {
			return nil, &ExpiredError{ID: rec.ID, At: rec.ExpiresAt}
		}
		return &Principal{Kind: keys.KindTunnel, ID: rec.ID, Tunnel: &rec}, nil
	}
	return nil, ErrInvalidKey
}

// MayConnect says whether p may open an SSH tunnel, and if not, why. Only
// tunnel keys and API keys holding tunnels:connect may: a tunnels:write or
// full key is the operator's credential and must never carry traffic.
func MayConnect(p *Principal) error {
	if p.Kind == keys.KindTunnel {
		return nil
	}
	if slices.Contains(p.Scopes, apiwire.ScopeConnect) {
		return nil
	}
	return fmt.Errorf("API key %s has scopes %v: only tunnel keys and API keys with scope %q may open tunnels",
		p.ID, p.Scopes, apiwire.ScopeConnect)
}
