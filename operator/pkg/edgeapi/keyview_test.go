package edgeapi

import (
	"context"
	"errors"
	"fmt"
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

// A list of one object's keys looks at the keys that carry its rarest
// label, not at every key of the cluster, and stays right as keys are
// written, relabelled and forgotten.
func TestKeyViewListsFromItsLabelIndex(t *testing.T) {
	v := NewKeyView(nil, map[string]string{LabelCluster: "c"})
	v.synced, v.lastStart = true, v.now()
	const n = 10000
	for i := range n {
		v.Put(apiwire.TunnelKey{ID: fmt.Sprintf("tk_%05d", i), Labels: map[string]string{
			LabelCluster: "c", LabelKind: "Tunnel", LabelUID: fmt.Sprint(i % (n / 2))}})
	}
	ctx := context.Background()
	one := map[string]string{LabelCluster: "c", LabelKind: "Tunnel", LabelUID: "7"}
	if c := v.byLabel.candidates(one); len(c) != 2 {
		t.Fatalf("a list by uid looks at %d keys, want the 2 with that uid", len(c))
	}
	keys, err := v.List(ctx, one)
	if err != nil || len(keys) != 2 || keys[0].ID != "tk_00007" || keys[1].ID != fmt.Sprintf("tk_%05d", n/2+7) {
		t.Fatalf("list by uid: %v %v", keys, err)
	}
	if all, err := v.List(ctx, map[string]string{LabelCluster: "c"}); err != nil || len(all) != n {
		t.Fatalf("list of the cluster: %d keys, %v", len(all), err)
	}
	// Relabelled: found by its new label only.
	v.Put(apiwire.TunnelKey{ID: "tk_00007", Labels: map[string]string{LabelCluster: "c", LabelKind: "Tunnel", LabelUID: "new"}})
	if keys, _ := v.List(ctx, one); len(keys) != 1 || keys[0].ID != fmt.Sprintf("tk_%05d", n/2+7) {
		t.Fatalf("after the relabel, by the old uid: %v", keys)
	}
	if keys, _ := v.List(ctx, map[string]string{LabelCluster: "c", LabelUID: "new"}); len(keys) != 1 || keys[0].ID != "tk_00007" {
		t.Fatalf("after the relabel, by the new uid: %v", keys)
	}
	v.Forget(fmt.Sprintf("tk_%05d", n/2+7))
	if keys, _ := v.List(ctx, one); len(keys) != 0 {
		t.Fatalf("after forgetting the last key of a uid: %v", keys)
	}
	if _, ok := v.byLabel[labelOf(LabelUID, "7")]; ok {
		t.Fatal("a label no key carries is still indexed")
	}
	if keys, _ := v.List(ctx, map[string]string{LabelCluster: "c", LabelUID: "nobody"}); len(keys) != 0 {
		t.Fatalf("a uid no key carries: %v", keys)
	}
}
