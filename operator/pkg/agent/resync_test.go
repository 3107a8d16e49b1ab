package agent

import (
	"testing"
	"time"
)

// TestResyncPeriodGrowsPastTheRate pins the pace of the agent's re-reads:
// 30 s up to 600 Tunnels, then a period that keeps the re-reads of all of
// them at 20 a second. A fixed 30 s at 10,000 Tunnels asked for more
// reconciles than the agent could serve, and after a restart the Tunnels
// of the initial list were never opened.
func TestResyncPeriodGrowsPastTheRate(t *testing.T) {
	for _, c := range []struct {
		tunnels int64
		want    time.Duration
	}{
		{0, 30 * time.Second},
		{1, 30 * time.Second},
		{600, 30 * time.Second},
		{1000, 50 * time.Second},
		{10000, 500 * time.Second},
	} {
		got := resyncPeriod(c.tunnels)
		if got != c.want {
			t.Errorf("resyncPeriod(%d) = %v, want %v", c.tunnels, got, c.want)
		}
		if rate := float64(c.tunnels) / got.Seconds(); rate > resyncRate {
			t.Errorf("%d Tunnels every %v: %.1f re-reads a second, above %d", c.tunnels, got, rate, resyncRate)
		}
	}
}

// TestResyncAfterIsSpread checks that Tunnels reconciled together do not
// come due together: the delays fall between a fifth before the period and
// the period (never later), and are not all the same.
func TestResyncAfterIsSpread(t *testing.T) {
	var r Reconciler
	r.tunnels.Store(10000)
	seen := map[time.Duration]bool{}
	for range 100 {
		d := r.resyncAfter()
		if d < 400*time.Second || d > 500*time.Second {
			t.Fatalf("resyncAfter at 10,000 Tunnels = %v, want within [400s, 500s]", d)
		}
		seen[d] = true
	}
	if len(seen) < 50 {
		t.Errorf("100 delays took only %d values: not spread", len(seen))
	}
}
