package app

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// edgeCheck is a readiness check that asks the edge in the background and
// answers a probe from its last result at once: the probe's deadline
// (seconds) never waits for an edge that drops packets, and probes of
// every replica cost the edge one call per interval each.
type edgeCheck struct {
	ask      func(context.Context) error
	interval time.Duration
	timeout  time.Duration

	mu       sync.Mutex
	asked    time.Time
	err      error
	inFlight bool
}

func newEdgeCheck(ask func(context.Context) error) *edgeCheck {
	return &edgeCheck{ask: ask, interval: 10 * time.Second, timeout: 5 * time.Second,
		err: errors.New("the edge API has not answered yet")}
}

// Check is the healthz.Checker: the last answer, and a new question when
// it is older than the interval.
func (c *edgeCheck) Check(*http.Request) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.inFlight && time.Since(c.asked) >= c.interval {
		c.inFlight = true
		go c.refresh()
	}
	return c.err
}

func (c *edgeCheck) refresh() {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	err := c.ask(ctx)
	c.mu.Lock()
	c.err, c.asked, c.inFlight = err, time.Now(), false
	c.mu.Unlock()
}

// cacheSynced is a readiness check: the component's caches have synced,
// so its reconcilers have what they need to start the work.
func cacheSynced(c cache.Cache) func(*http.Request) error {
	return func(*http.Request) error {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("the caches have not synced yet")
		}
		return nil
	}
}
