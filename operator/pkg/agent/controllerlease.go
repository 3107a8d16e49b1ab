package agent

import (
	"context"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ControllerLease says whether the operator's controller runs, from its
// leader Lease: held, and renewed within its duration. The agent reads it
// (get, at most every leaseLook, with the Lease rights its heartbeat has)
// to tell a new Tunnel the controller is about to take, which needs no
// status yet, from one that no controller will take, which is KeyPending.
// Without leader election there is no Lease, and the agent falls back on
// keyPendingQuiet.
type ControllerLease struct {
	Reader client.Reader
	Key    types.NamespacedName

	mu       sync.Mutex
	lookedAt time.Time
	until    time.Time
}

// leaseLook is how old the last look at the Lease may be.
const leaseLook = 5 * time.Second

// AliveUntil is when the controller stops counting as running unless its
// Lease is renewed meanwhile; zero when no controller holds it, or the
// Lease cannot be read. A released Lease (a clean shutdown) has no holder.
func (c *ControllerLease) AliveUntil(ctx context.Context, now time.Time) time.Time {
	if c == nil {
		return time.Time{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.lookedAt.IsZero() && now.Sub(c.lookedAt) < leaseLook {
		return c.until
	}
	c.lookedAt, c.until = now, time.Time{}
	var l coordinationv1.Lease
	if err := c.Reader.Get(ctx, c.Key, &l); err != nil {
		return c.until // no Lease, or no right to read it: not known to run
	}
	s := l.Spec
	if s.HolderIdentity != nil && *s.HolderIdentity != "" && s.RenewTime != nil && s.LeaseDurationSeconds != nil {
		c.until = s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second)
	}
	return c.until
}
