package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Node is one edge node of a cluster, as it announces itself. Its record
// lives under an etcd lease: a node that stops renewing it (killed, cut
// off) drops out of the list when the lease expires.
type Node struct {
	Name     string `json:"name"`
	APIURL   string `json:"api_url,omitempty"`
	SSHAddr  string `json:"ssh_addr"`
	HTTPURL  string `json:"http_url,omitempty"`
	HTTPSURL string `json:"https_url,omitempty"`
	// Draining: the node takes no new public connections and asks agents
	// to move their sessions away.
	Draining  bool      `json:"draining,omitempty"`
	StartedAt time.Time `json:"started_at"`
	// HeartbeatAt is when the node last rewrote its record; the node
	// measures its watch's lag on it.
	HeartbeatAt time.Time `json:"heartbeat_at"`
}

// ErrNotShared is returned by cluster operations on a bbolt store.
var ErrNotShared = errors.New("the store is not shared: the edge runs as a single node")

func (b *etcdBackend) nodeKey(name string) string { return b.prefix + "nodes/" + name }

// Nodes lists the live nodes, ordered by name, from this node's mirror of
// the store: it answers while etcd is unreachable (as it last was).
func (s *Store) Nodes() ([]Node, error) {
	if s.etcd == nil {
		return nil, ErrNotShared
	}
	out := []Node{}
	for _, v := range s.etcd.w.mirroredValues(s.etcd.prefix + "nodes/") {
		if n, ok := decode[Node](v); ok {
			out = append(out, n)
		}
	}
	return out, nil
}

// Membership keeps one node's record alive until Leave.
type Membership struct {
	b      *etcdBackend
	ttl    time.Duration
	cancel context.CancelFunc
	done   chan struct{}
	update chan func(*Node)
}

// Join announces n with a lease of ttl and keeps it: the record is
// rewritten every ttl/3 (which also measures the watch's lag), and put
// again under a new lease when the old one was lost, as after an outage
// of etcd longer than ttl. It returns once the first record is written.
func (s *Store) Join(n Node, ttl time.Duration) (*Membership, error) {
	if s.etcd == nil {
		return nil, ErrNotShared
	}
	b := s.etcd
	b.w.self.Store(&n.Name)
	m := &Membership{b: b, ttl: ttl, done: make(chan struct{}), update: make(chan func(*Node))}
	lease, err := m.announce(&n)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go m.run(ctx, n, lease)
	return m, nil
}

// announce writes n under a fresh lease.
func (m *Membership) announce(n *Node) (clientv3.LeaseID, error) {
	var lease clientv3.LeaseID
	err := m.b.do("write", func(ctx context.Context) error {
		g, err := m.b.c.Grant(ctx, int64(max(m.ttl/time.Second, 1)))
		if err != nil {
			return err
		}
		lease = g.ID
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("announcing node %s: %w", n.Name, err)
	}
	return lease, m.put(n, lease)
}

func (m *Membership) put(n *Node, lease clientv3.LeaseID) error {
	n.HeartbeatAt = time.Now().UTC()
	v, err := json.Marshal(n)
	if err != nil {
		return err
	}
	return m.b.do("write", func(ctx context.Context) error {
		_, err := m.b.c.Put(ctx, m.b.nodeKey(n.Name), string(v), clientv3.WithLease(lease))
		return err
	})
}

func (m *Membership) run(ctx context.Context, n Node, lease clientv3.LeaseID) {
	defer close(m.done)
	beat := time.NewTicker(max(m.ttl/3, 100*time.Millisecond))
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			// Leaving revokes the lease: the record goes at once, rather
			// than when the lease would have expired.
			rctx, cancel := m.b.ctx()
			_, _ = m.b.c.Revoke(rctx, lease)
			cancel()
			return
		case change := <-m.update:
			change(&n)
		case <-beat.C:
		}
		err := m.b.do("write", func(ctx context.Context) error {
			_, err := m.b.c.KeepAliveOnce(ctx, lease)
			return err
		})
		if err == nil {
			err = m.put(&n, lease)
		}
		if err != nil {
			// The lease may have expired during an outage: take a new one.
			// Failing that, try again at the next beat.
			if l, aerr := m.announce(&n); aerr == nil {
				lease = l
			}
		}
	}
}

// Set changes the announced record (draining) and rewrites it at once.
func (m *Membership) Set(change func(*Node)) {
	select {
	case m.update <- change:
	case <-m.done:
	}
}

// Leave removes the node's record and stops renewing it.
func (m *Membership) Leave() {
	m.cancel()
	<-m.done
}

func (w *watcher) observeLag(c Change) {
	self := w.self.Load()
	n, ok := c.Next.(*Node)
	if self == nil || !ok || n.Name != *self {
		return
	}
	w.b.obs.StoreWatchLag(time.Since(n.HeartbeatAt))
}

// ClaimIdentity records value under name for the whole cluster, unless a
// value is recorded already: it returns the recorded value, so a node can
// compare its own (the SSH host key, the API certificate) with the one the
// cluster's agents pin.
func (s *Store) ClaimIdentity(name, value string) (string, error) {
	if s.etcd == nil {
		return value, nil
	}
	b := s.etcd
	key := b.prefix + "identity/" + name
	var recorded string
	err := b.do("write", func(ctx context.Context) error {
		resp, err := b.c.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, value)).
			Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return err
		}
		recorded = value
		if !resp.Succeeded {
			if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
				recorded = string(kvs[0].Value)
			}
		}
		return nil
	})
	return recorded, err
}
