package edgeapi

import (
	"context"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// KeepKey renews a tunnel key the operator keeps once less than half of
// its lifetime is left, well before it expires, so a missed reconcile or
// a short edge outage never lets a serving key lapse. It returns when to
// look at the key again (0: it never expires), or expired when the key is
// past saving: the caller issues a new one.
func KeepKey(ctx context.Context, api TunnelKeys, k *apiwire.TunnelKey, now time.Time) (next time.Duration, expired bool, err error) {
	renewAt, ok := k.RenewAt()
	if !ok {
		return 0, false, nil
	}
	if !now.Before(*k.ExpiresAt) {
		return 0, true, nil
	}
	if now.Before(renewAt) {
		return renewAt.Sub(now), false, nil
	}
	renewed, err := api.RenewTunnelKey(ctx, k.ID)
	if Code(err) == apiwire.CodeKeyExpired {
		return 0, true, nil
	}
	if err != nil {
		return 0, false, err
	}
	renewAt, ok = renewed.RenewAt()
	if !ok {
		return 0, false, nil
	}
	// A TTL shorter than the time a renewal takes would hot-loop: look
	// again no sooner than a second from now.
	return max(renewAt.Sub(now), time.Second), false, nil
}

// Sooner is d when it is set and before after; otherwise after.
func Sooner(after, d time.Duration) time.Duration {
	if d > 0 && (after <= 0 || d < after) {
		return d
	}
	return after
}
