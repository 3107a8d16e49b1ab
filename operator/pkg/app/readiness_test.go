package app

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestEdgeCheck: a probe is answered at once from the last answer of the
// edge, never waits for the edge, asks again once the answer is older
// than the interval, and is not ready before the first answer.
func TestEdgeCheck(t *testing.T) {
	var calls atomic.Int32
	var down atomic.Bool
	release := make(chan struct{})
	c := newEdgeCheck(func(ctx context.Context) error {
		calls.Add(1)
		<-release // an edge that has not answered yet
		if down.Load() {
			return errors.New("connection refused")
		}
		return nil
	})
	c.interval = 50 * time.Millisecond
	if err := c.Check(nil); err == nil {
		t.Fatal("ready before the edge answered")
	}
	// The probe returned while the question hangs; a second probe asks
	// nothing more.
	await(t, func() bool { return calls.Load() == 1 })
	if err := c.Check(nil); err == nil || calls.Load() != 1 {
		t.Fatalf("second probe: err %v, %d questions", err, calls.Load())
	}
	close(release)
	await(t, func() bool { return c.Check(nil) == nil })
	down.Store(true)
	await(t, func() bool { return c.Check(nil) != nil })
	if n := calls.Load(); n < 2 {
		t.Fatalf("%d questions, want a new one after the interval", n)
	}
	down.Store(false)
	await(t, func() bool { return c.Check(nil) == nil })
}

func await(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
