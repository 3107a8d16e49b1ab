package agent

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Waker enqueues a reconcile of an object from outside its controller (a
// tunnel's session changed state) without blocking the caller and without
// a goroutine per wake: the controller's workqueue takes the key at once
// and merges repeated wakes of one key. Wakes before the controller starts
// wait in a set of keys, one entry per key; wakes after it stopped are
// dropped by its queue.
type Waker struct {
	mu      sync.Mutex
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]
	pending map[types.NamespacedName]struct{}
}

// Source is the Waker as a controller's source (WatchesRawSource).
func (w *Waker) Source() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.queue = q
		for key := range w.pending {
			q.Add(reconcile.Request{NamespacedName: key})
		}
		w.pending = nil
		return nil
	})
}

// Wake asks for a reconcile of key.
func (w *Waker) Wake(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queue != nil {
		w.queue.Add(reconcile.Request{NamespacedName: key})
		return
	}
	if w.pending == nil {
		w.pending = map[types.NamespacedName]struct{}{}
	}
	w.pending[key] = struct{}{}
}
