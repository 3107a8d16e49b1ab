package edgeapi

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/client"
)

// countingPager counts the reads of a pager.
type countingPager struct {
	KeyPager
	reads atomic.Int32
}

func (c *countingPager) ListTunnelKeysPage(ctx context.Context, in apiwire.KeyPageRequest) (*apiwire.KeyPage, error) {
	c.reads.Add(1)
	return c.KeyPager.ListTunnelKeysPage(ctx, in)
}

// A view older than MaxAge is read again before it is answered from; when
// that read fails, List says so, and readers within MaxAge of the failure
// get its error without a read each; the next read is made once MaxAge
// has passed since the failure.
func TestKeyViewAnswersOnlyFromARecentRead(t *testing.T) {
	// A client of a port nothing listens on: every read fails, as when
	// the edge is down.
	down := client.New("http://127.0.0.1:1", "k")
	pager := &countingPager{KeyPager: down}
	v := NewKeyView(pager, map[string]string{LabelCluster: "c"})
	v.Interval = time.Minute
	clock := &fakeClock{t: time.Unix(1000, 0)}
	v.now = clock.now
	// As if a read had succeeded at the start.
	v.synced, v.lastStart = true, clock.now()
	v.Put(apiwire.TunnelKey{ID: "tk_1", Labels: map[string]string{LabelCluster: "c"}})
	ctx := context.Background()
	if keys, err := v.List(ctx, map[string]string{LabelCluster: "c"}); err != nil || len(keys) != 1 || pager.reads.Load() != 0 {
		t.Fatalf("a recent view: %v %v, %d reads", keys, err, pager.reads.Load())
	}
	_ = clock.sleep(ctx, 2*time.Minute+time.Second) // older than MaxAge (2 × Interval)
	_, err := v.List(ctx, map[string]string{LabelCluster: "c"})
	if err == nil || pager.reads.Load() != 1 {
		t.Fatalf("a stale view with the edge down: %v, %d reads", err, pager.reads.Load())
	}
	_ = clock.sleep(ctx, time.Minute)
	if _, again := v.List(ctx, map[string]string{LabelCluster: "c"}); !errors.Is(again, err) || pager.reads.Load() != 1 {
		t.Fatalf("within MaxAge of the failed read: %v, %d reads; want its error and no read", again, pager.reads.Load())
	}
	_ = clock.sleep(ctx, time.Minute+time.Second)
	if _, err := v.List(ctx, map[string]string{LabelCluster: "c"}); err == nil || pager.reads.Load() != 2 {
		t.Fatalf("past MaxAge of the failed read: %v, %d reads; want a new read", err, pager.reads.Load())
	}
}

// Jitter spreads a period over [d, d+d/5]: periods that began together
// (the Tunnels of an install, a restart) come due apart.
func TestJitterSpreadsPeriods(t *testing.T) {
	const d = time.Minute
	seen := map[time.Duration]bool{}
	for range 1000 {
		j := Jitter(d)
		if j < d || j > d+d/5 {
			t.Fatalf("Jitter(%s) = %s, want within [%s, %s]", d, j, d, d+d/5)
		}
		seen[j] = true
	}
	if len(seen) < 900 {
		t.Fatalf("1,000 jittered minutes took %d distinct values: they do not spread", len(seen))
	}
	if Jitter(0) != 0 {
		t.Fatalf("Jitter(0) = %s, want 0 (no period)", Jitter(0))
	}
}
