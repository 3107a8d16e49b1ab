package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

// expiryCheck is how often the edge looks for expired keys: a twentieth of
// the TTL, so a session outlives its key by at most 5% of a lifetime,
// within bounds that keep the scan cheap and tests quick.
func expiryCheck(ttl time.Duration) time.Duration {
	return min(max(ttl/20, 50*time.Millisecond), 30*time.Second)
}

// alignExpiries makes the stored keys agree with the configured TTL: keys
// from an edge without expiry (or with it turned off) get a full TTL from
// now, so an upgrade cuts no tunnel; with the TTL off, no key expires.
func (e *Edge) alignExpiries() error {
	ks, err := e.st.ListTunnelKeys()
	if err != nil {
		return fmt.Errorf("listing tunnel keys to set their expiry: %w", err)
	}
	ttl, now := e.cfg.TunnelKeyTTL, time.Now().UTC()
	for _, k := range ks {
		if (ttl > 0) == !k.ExpiresAt.IsZero() {
			continue
		}
		_, err := e.st.UpdateTunnelKey(k.ID, func(k *store.TunnelKey) error {
			k.ExpiresAt, k.TTL = time.Time{}, 0
			if ttl > 0 {
				k.ExpiresAt, k.TTL = now.Add(ttl), ttl
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("setting the expiry of tunnel key %s: %w", k.ID, err)
		}
	}
	return nil
}

// expireSessions ends the live sessions of expired keys with key_expired
// until ctx ends. The keys stay (an expired key only refuses logins and
// renewals), so their owner can see what happened and replace them.
func (e *Edge) expireSessions(ctx context.Context) {
	t := time.NewTicker(expiryCheck(e.cfg.TunnelKeyTTL))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Only keys with a live session matter: walk the sessions, not
		// every stored key.
		now, seen := time.Now(), map[string]bool{}
		// Each termination waits briefly for its agent's acknowledgement:
		// in parallel, so one silent agent delays no other.
		var wg sync.WaitGroup
		for _, in := range e.reg.List() {
			if seen[in.KeyID] {
				continue
			}
			seen[in.KeyID] = true
			k, err := e.st.GetTunnelKey(in.KeyID)
			if err != nil || !k.Expired(now) {
				continue // an API key's session, or a key revoked meanwhile
			}
			wg.Go(func() {
				n := e.reg.TerminateKey(k.ID, protocol.CodeKeyExpired, fmt.Sprintf(
					"tunnel key %s expired at %s without renewal; the operator renews its keys, so check that its controller runs",
					k.ID, k.ExpiresAt.UTC().Format(time.RFC3339)))
				e.log.Info("ended the sessions of an expired tunnel key", "key", k.ID, "sessions", n)
			})
		}
		wg.Wait()
	}
}
