package store

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	v3rpc "go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Kind names what a Change is about.
type Kind string

// The kinds of records a Change reports.
const (
	KindAPIKey      Kind = "api_key"
	KindTunnelKey   Kind = "tunnel_key"
	KindDomain      Kind = "domain"
	KindTCPEndpoint Kind = "tcp_endpoint"
	KindSecret      Kind = "secret"
	KindNode        Kind = "node"
	// KindAccessPolicy reports a policy by its id, KindAccessKeys the
	// access keys; neither carries the record (it is sealed).
	KindAccessPolicy Kind = "access_policy"
	KindAccessKeys   Kind = "access_keys"
)

// reported are the buckets whose changes are reported by name only,
// without keeping their values in memory.
var reported = map[string]Kind{
	bucketSecrets:        KindSecret,
	bucketAccessPolicies: KindAccessPolicy,
	bucketAccessKeys:     KindAccessKeys,
}

// mirrored are the buckets every node keeps in memory: what the public side
// serves from (the host index) and what followers of changes need the
// previous value of (a deleted endpoint's port).
var mirrored = map[string]Kind{
	bucketAPIKeys:    KindAPIKey,
	bucketTunnelKeys: KindTunnelKey,
	bucketDomains:    KindDomain,
	bucketTCP:        KindTCPEndpoint,
}

// Change is one record changed by any node of a cluster, as the etcd watch
// delivers it. Prev and Next are the record before and after (*APIKey,
// *TunnelKey, *Domain, *TCPEndpoint or *Node); Prev is nil for a new
// record, Next for a deleted one. Secrets report their name only.
type Change struct {
	Kind       Kind
	Name       string
	Prev, Next any
	Rev        int64
}

// OnChange registers fn to be told every change, in the order etcd made
// them, once Open has loaded the state: changes by this node too. fn runs
// on the watch's goroutine, so it must not block. A bbolt store has no
// other writer and never calls fn: its callers act on their own writes.
func (s *Store) OnChange(fn func(Change)) {
	if s.etcd != nil {
		s.etcd.w.onChange.Store(&fn)
	}
}

// watcher follows the edge's keys: it keeps the mirror and the host index
// and wakes the writers waiting for their own change to arrive.
type watcher struct {
	s      *Store
	b      *etcdBackend
	cancel context.CancelFunc
	done   chan struct{}

	onChange atomic.Pointer[func(Change)]
	// self is this node's name, to measure the watch's lag on its own
	// heartbeats (nodes.go).
	self atomic.Pointer[string]

	mu      sync.Mutex
	mirror  map[string][]byte // full key → value, mirrored buckets and nodes
	applied int64             // the revision the mirror is at
	moved   chan struct{}     // closed and replaced when applied moves
}

func startWatcher(s *Store, b *etcdBackend) (*watcher, error) {
	w := &watcher{s: s, b: b, mirror: map[string][]byte{}, moved: make(chan struct{}), done: make(chan struct{})}
	rev, err := w.load()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go w.run(ctx, rev)
	return w, nil
}

func (w *watcher) stop() {
	w.cancel()
	<-w.done
}

// snapshot reads every mirrored key at one revision.
func (w *watcher) snapshot() (map[string][]byte, int64, error) {
	t := &etcdTx{b: w.b, readOnly: true}
	out := map[string][]byte{}
	prefixes := []string{w.b.prefix + "nodes/"}
	for bucket := range mirrored {
		prefixes = append(prefixes, w.b.key(bucket, ""))
	}
	for _, p := range prefixes {
		resp, err := t.fetch(p, clientv3.WithPrefix())
		if err != nil {
			return nil, 0, err
		}
		for _, kv := range resp.Kvs {
			out[string(kv.Key)] = kv.Value
		}
	}
	return out, t.rev, nil
}

// load fills the mirror and builds the host index from a snapshot.
func (w *watcher) load() (int64, error) {
	snap, rev, err := w.snapshot()
	if err != nil {
		return 0, err
	}
	w.s.hostsMu.Lock()
	defer w.s.hostsMu.Unlock()
	idx := newHostIndex()
	for k, v := range snap {
		bucket, _, _ := w.b.split(k)
		indexValue(idx, bucket, nil, v)
	}
	w.s.hosts.Store(idx)
	w.mu.Lock()
	w.mirror, w.applied = snap, rev
	w.mu.Unlock()
	return rev, nil
}

func (w *watcher) run(ctx context.Context, rev int64) {
	defer close(w.done)
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(ctx)
		ch := w.b.c.Watch(clientv3.WithRequireLeader(wctx), w.b.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		rev = w.follow(ch, rev)
		cancel()
		if ctx.Err() != nil {
			return
		}
		// The watch ended: compacted past us, or its member lost the
		// leader. Catch up from a fresh snapshot after a pause.
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
		if r, err := w.resync(); err == nil {
			rev = r
		}
	}
}

// follow applies a watch's events until it ends, and returns the last
// revision applied.
func (w *watcher) follow(ch clientv3.WatchChan, rev int64) int64 {
	for resp := range ch {
		if err := resp.Err(); err != nil {
			w.b.obs.StoreRequest("watch", 0, err)
			if errors.Is(err, v3rpc.ErrCompacted) {
				return rev
			}
			continue
		}
		for _, ev := range resp.Events {
			var v []byte
			if ev.Type == mvccpb.PUT {
				v = ev.Kv.Value
			}
			w.apply(string(ev.Kv.Key), v, ev.Kv.ModRevision)
		}
		if r := resp.Header.Revision; r > rev {
			rev = r
		}
		w.advance(rev)
	}
	return rev
}

// resync replaces the mirror with a snapshot and reports every difference
// as a change, so a deletion the watch missed still reaches the followers.
func (w *watcher) resync() (int64, error) {
	snap, rev, err := w.snapshot()
	if err != nil {
		return 0, err
	}
	w.mu.Lock()
	old := w.mirror
	w.mu.Unlock()
	for k := range old {
		if _, ok := snap[k]; !ok {
			w.apply(k, nil, rev)
		}
	}
	for k, v := range snap {
		if string(old[k]) != string(v) {
			w.apply(k, v, rev)
		}
	}
	w.advance(rev)
	return rev, nil
}

// apply takes one changed key (value nil: deleted) into the mirror and the
// host index, and reports it.
func (w *watcher) apply(key string, value []byte, rev int64) {
	var kind Kind
	var name, bucket string
	if n, ok := strings.CutPrefix(key, w.b.prefix+"nodes/"); ok {
		kind, name = KindNode, n
	} else if b, n, ok := w.b.split(key); ok {
		bucket, name = b, n
		if k, byName := reported[b]; byName {
			kind = k
		} else if kind, ok = mirrored[b]; !ok {
			return
		}
	} else {
		return // a mark
	}
	var prev []byte
	if _, byName := reported[bucket]; !byName {
		w.mu.Lock()
		prev = w.mirror[key]
		if value == nil {
			delete(w.mirror, key)
		} else {
			w.mirror[key] = value
		}
		w.mu.Unlock()
	}
	if bucket == bucketTunnelKeys || bucket == bucketDomains {
		w.s.hostsMu.Lock()
		next := w.s.hosts.Load().clone()
		indexValue(next, bucket, prev, value)
		w.s.hosts.Store(next)
		w.s.hostsMu.Unlock()
	}
	c := Change{Kind: kind, Name: name, Rev: rev, Prev: decodeKind(kind, prev), Next: decodeKind(kind, value)}
	if kind == KindNode {
		w.observeLag(c)
	}
	if fn := w.onChange.Load(); fn != nil {
		(*fn)(c)
	}
}

func (w *watcher) advance(rev int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if rev > w.applied {
		w.applied = rev
		close(w.moved)
		w.moved = make(chan struct{})
	}
}

// wait returns once the watch has applied rev, or after the request
// timeout: a write then returns with the index behind for a moment
// rather than failing a write that did commit.
func (w *watcher) wait(rev int64) {
	deadline := time.NewTimer(w.b.opTO)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		at, moved := w.applied, w.moved
		w.mu.Unlock()
		if at >= rev {
			return
		}
		select {
		case <-moved:
		case <-deadline.C:
			return
		}
	}
}

// indexValue moves the host index from a record's previous value to its
// new one (either nil).
func indexValue(x *hostIndex, bucket string, prev, next []byte) {
	switch bucket {
	case bucketTunnelKeys:
		if k, ok := decode[TunnelKey](prev); ok {
			x.addKey(k, -1)
		}
		if k, ok := decode[TunnelKey](next); ok {
			x.addKey(k, 1)
		}
	case bucketDomains:
		if d, ok := decode[Domain](prev); ok && next == nil {
			delete(x.domains, d.Name)
		}
		if d, ok := decode[Domain](next); ok {
			x.setDomain(d)
		}
	}
}

func decode[T any](v []byte) (T, bool) {
	var out T
	if v == nil || json.Unmarshal(v, &out) != nil {
		return out, false
	}
	return out, true
}

func decodeKind(kind Kind, v []byte) any {
	if v == nil {
		return nil
	}
	var out any
	var ok bool
	switch kind {
	case KindAPIKey:
		var r APIKey
		r, ok = decode[APIKey](v)
		out = &r
	case KindTunnelKey:
		var r TunnelKey
		r, ok = decode[TunnelKey](v)
		out = &r
	case KindDomain:
		var r Domain
		r, ok = decode[Domain](v)
		out = &r
	case KindTCPEndpoint:
		var r TCPEndpoint
		r, ok = decode[TCPEndpoint](v)
		out = &r
	case KindNode:
		var r Node
		r, ok = decode[Node](v)
		out = &r
	}
	if !ok {
		return nil
	}
	return out
}

// mirroredValues returns the mirror's values under prefix, in key order.
func (w *watcher) mirroredValues(prefix string) [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	var keys []string
	for k := range w.mirror {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = w.mirror[k]
	}
	return out
}
