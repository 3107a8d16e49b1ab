package edgeapi

import (
	"context"
	"fmt"
	"sync"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// BatchAPI is what the Batcher calls.
type BatchAPI interface {
	CreateTunnelKeys(ctx context.Context, in []apiwire.CreateTunnelKey) ([]apiwire.TunnelKeyResult, error)
	RenewTunnelKeys(ctx context.Context, ids []string) ([]apiwire.TunnelKeyResult, error)
}

// batchTimeout bounds one batch call (it may wait for the key's budget
// first); each caller still leaves when its own context ends.
const batchTimeout = time.Minute

// Batcher issues and renews tunnel keys for many reconcilers at once:
// each call joins a queue, and one sender at a time sends what has queued
// in a single batch call (up to client.MaxBatch). Nothing waits for a
// batch to fill: with the budget to spare, a call goes alone at once; when
// calls wait for the budget, the ones made meanwhile go together, so a
// cold start of thousands of keys takes tens of calls, not thousands.
type Batcher struct {
	create batchQueue[apiwire.CreateTunnelKey]
	renew  batchQueue[string]
}

// NewBatcher batches api's calls.
func NewBatcher(api BatchAPI) *Batcher {
	return &Batcher{
		create: batchQueue[apiwire.CreateTunnelKey]{call: api.CreateTunnelKeys},
		renew:  batchQueue[string]{call: api.RenewTunnelKeys},
	}
}

// Create issues one key (see client.Client.CreateTunnelKey).
func (b *Batcher) Create(ctx context.Context, in apiwire.CreateTunnelKey) (*apiwire.TunnelKey, error) {
	return b.create.do(ctx, in)
}

// Renew renews one key (see client.Client.RenewTunnelKey).
func (b *Batcher) Renew(ctx context.Context, id string) (*apiwire.TunnelKey, error) {
	return b.renew.do(ctx, id)
}

// batchQueue is the queue of one kind of call.
type batchQueue[T any] struct {
	call func(ctx context.Context, items []T) ([]apiwire.TunnelKeyResult, error)

	mu      sync.Mutex
	pending []*batchItem[T]
	sending bool
}

type batchItem[T any] struct {
	in   T
	done chan batchResult // buffered: the sender never blocks on a caller that left
}

type batchResult struct {
	key *apiwire.TunnelKey
	err error
}

func (q *batchQueue[T]) do(ctx context.Context, in T) (*apiwire.TunnelKey, error) {
	it := &batchItem[T]{in: in, done: make(chan batchResult, 1)}
	q.mu.Lock()
	q.pending = append(q.pending, it)
	if !q.sending {
		q.sending = true
		go q.send()
	}
	q.mu.Unlock()
	select {
	case r := <-it.done:
		return r.key, r.err
	case <-ctx.Done():
		// The call may still be made: a key issued for a caller that left
		// is a stray, which the caller's next look revokes.
		return nil, ctx.Err()
	}
}

// send sends batches until the queue is empty.
func (q *batchQueue[T]) send() {
	for {
		q.mu.Lock()
		n := min(len(q.pending), apiwire.MaxBatch)
		if n == 0 {
			q.sending = false
			q.mu.Unlock()
			return
		}
		batch := q.pending[:n:n]
		q.pending = q.pending[n:]
		q.mu.Unlock()

		items := make([]T, n)
		for i, it := range batch {
			items[i] = it.in
		}
		ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
		results, err := q.call(ctx, items)
		cancel()
		if err == nil && len(results) != n {
			err = fmt.Errorf("edge API: a batch of %d answered %d results", n, len(results))
		}
		for i, it := range batch {
			if err != nil {
				it.done <- batchResult{err: err}
				continue
			}
			it.done <- batchResult{key: results[i].Key, err: results[i].Err()}
		}
	}
}
