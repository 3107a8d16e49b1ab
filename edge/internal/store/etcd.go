package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// EtcdConfig selects the etcd cluster a store lives in.
type EtcdConfig struct {
	// Endpoints are the members' client URLs, e.g. https://10.0.0.1:2379.
	Endpoints []string
	// CAFile verifies the members' certificates; CertFile and KeyFile are
	// this node's client certificate. All empty: plain connections.
	CAFile, CertFile, KeyFile string
	// Prefix is where the edge's keys live (default "/tuna-edge/"), so one
	// etcd can hold several edges, or an edge and other tenants.
	Prefix string
	// DialTimeout bounds connecting at start (default 5s); OpTimeout bounds
	// each request (default 5s): a store without quorum fails with
	// ErrUnavailable after it rather than hanging a caller.
	DialTimeout, OpTimeout time.Duration
	// Observer is told the latency and outcome of every request and the
	// watch's lag; nil: nothing is recorded.
	Observer Observer
}

// Observer records how the state store behaves (edge/metrics implements
// it).
type Observer interface {
	// StoreRequest: one request of kind op ("read", "write", "watch")
	// took d and failed with err (nil: it succeeded). A transaction
	// retried after losing a race reports "conflict".
	StoreRequest(op string, d time.Duration, err error)
	// StoreWatchLag: a change this node wrote reached it through the
	// watch d after it was made.
	StoreWatchLag(d time.Duration)
}

type nopObserver struct{}

func (nopObserver) StoreRequest(string, time.Duration, error) {}
func (nopObserver) StoreWatchLag(time.Duration)               {}

// etcdBackend keeps the state in etcd. A transaction reads one snapshot
// (one revision) and commits with a compare on the revision of every key
// it read, so it is serialisable: when another node changed what it read,
// it runs again on a fresh snapshot. A range read (each) cannot be
// compared key by key, since a key deleted from the range leaves nothing
// to compare, so every write to a bucket also bumps the bucket's mark
// key, and a transaction that ranged over a bucket compares the mark.
type etcdBackend struct {
	c      *clientv3.Client
	prefix string
	opTO   time.Duration
	obs    Observer
	w      *watcher
}

// maxAttempts bounds the retries of one transaction that keeps losing
// races; past it the caller gets ErrUnavailable, as for an overloaded
// store.
const maxAttempts = 32

func (c EtcdConfig) tls() (*tls.Config, error) {
	if c.CAFile == "" && c.CertFile == "" && c.KeyFile == "" {
		return nil, nil
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, errors.New("etcd: set both the client certificate and its key, or neither")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		pemBytes, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("etcd: reading CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemBytes) {
			return nil, fmt.Errorf("etcd: CA file %s holds no PEM certificate", c.CAFile)
		}
		cfg.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("etcd: loading the client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// OpenEtcd connects to etcd, loads what the edge serves from (the host
// index, the nodes) and follows every later change through a watch.
func OpenEtcd(cfg EtcdConfig) (*Store, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcd: no endpoints")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "/tuna-edge/"
	}
	if !strings.HasSuffix(cfg.Prefix, "/") {
		cfg.Prefix += "/"
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = 5 * time.Second
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	tlsCfg, err := cfg.tls()
	if err != nil {
		return nil, err
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		TLS:         tlsCfg,
		Logger:      zap.NewNop(),
		// Keepalives find a dead member in seconds, so the client moves
		// to another one instead of waiting on a silent connection.
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("etcd: connecting to %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	b := &etcdBackend{c: c, prefix: cfg.Prefix, opTO: cfg.OpTimeout, obs: cfg.Observer}
	s := &Store{be: b, etcd: b}
	if b.w, err = startWatcher(s, b); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("etcd: loading the edge's state from %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	return s, nil
}

func (b *etcdBackend) key(bucket, key string) string { return b.prefix + "data/" + bucket + "/" + key }
func (b *etcdBackend) mark(bucket string) string     { return b.prefix + "marks/" + bucket }

// split is key's inverse: the bucket and key of a data key.
func (b *etcdBackend) split(full string) (bucket, key string, ok bool) {
	rest, ok := strings.CutPrefix(full, b.prefix+"data/")
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, "/")
}

func (b *etcdBackend) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), b.opTO)
}

// do runs one request, recording its latency and outcome.
func (b *etcdBackend) do(op string, fn func(ctx context.Context) error) error {
	ctx, cancel := b.ctx()
	defer cancel()
	start := time.Now()
	err := fn(ctx)
	b.obs.StoreRequest(op, time.Since(start), err)
	if err != nil {
		return unavailable(op, err)
	}
	return nil
}

func (b *etcdBackend) close() error {
	b.w.stop()
	return b.c.Close()
}

func (b *etcdBackend) view(fn func(tx) error) error {
	return fn(&etcdTx{b: b, readOnly: true})
}

func (b *etcdBackend) update(fn func(tx) error) (int64, error) {
	for range maxAttempts {
		t := &etcdTx{b: b, reads: map[string]int64{}, writes: map[string][]byte{}, written: map[string]bool{}}
		if err := fn(t); err != nil {
			return 0, err
		}
		rev, ok, err := t.commit()
		if err != nil {
			return 0, err
		}
		if ok {
			return rev, nil
		}
		b.obs.StoreRequest("conflict", 0, nil)
	}
	return 0, unavailable("write", fmt.Errorf("the transaction lost %d races in a row to other writers", maxAttempts))
}

// etcdTx reads at one revision, fixed by its first read, and buffers its
// writes until commit.
type etcdTx struct {
	b        *etcdBackend
	readOnly bool
	rev      int64
	// reads: key → mod revision seen (0: absent); ranges: buckets ranged
	// over, by their mark's mod revision.
	reads   map[string]int64
	ranges  map[string]int64
	writes  map[string][]byte // nil value: delete
	written map[string]bool   // buckets written
}

// fetch reads key (with opts) at the transaction's revision.
func (t *etcdTx) fetch(key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if t.rev > 0 {
		opts = append(opts, clientv3.WithRev(t.rev))
	}
	var resp *clientv3.GetResponse
	err := t.b.do("read", func(ctx context.Context) error {
		var err error
		resp, err = t.b.c.Get(ctx, key, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	if t.rev == 0 {
		t.rev = resp.Header.Revision
	}
	return resp, nil
}

func (t *etcdTx) get(bucket, key string) ([]byte, error) {
	full := t.b.key(bucket, key)
	if v, ok := t.writes[full]; ok {
		return v, nil
	}
	resp, err := t.fetch(full)
	if err != nil {
		return nil, err
	}
	var mod int64
	var v []byte
	if len(resp.Kvs) > 0 {
		mod, v = resp.Kvs[0].ModRevision, resp.Kvs[0].Value
	}
	if !t.readOnly {
		t.reads[full] = mod
	}
	return v, nil
}

func (t *etcdTx) put(bucket, key string, value []byte) error {
	if t.readOnly {
		return errors.New("store: write in a read-only transaction")
	}
	t.writes[t.b.key(bucket, key)] = append([]byte{}, value...)
	t.written[bucket] = true
	return nil
}

func (t *etcdTx) del(bucket, key string) error {
	if t.readOnly {
		return errors.New("store: write in a read-only transaction")
	}
	t.writes[t.b.key(bucket, key)] = nil
	t.written[bucket] = true
	return nil
}

func (t *etcdTx) each(bucket, prefix string, fn func(string, []byte) error) error {
	if !t.readOnly {
		// The mark first: read at the same revision as the range.
		resp, err := t.fetch(t.b.mark(bucket))
		if err != nil {
			return err
		}
		var mod int64
		if len(resp.Kvs) > 0 {
			mod = resp.Kvs[0].ModRevision
		}
		if t.ranges == nil {
			t.ranges = map[string]int64{}
		}
		t.ranges[bucket] = mod
	}
	from := t.b.key(bucket, prefix)
	resp, err := t.fetch(from, clientv3.WithPrefix())
	if err != nil {
		return err
	}
	vals := map[string][]byte{}
	for _, kv := range resp.Kvs {
		vals[string(kv.Key)] = kv.Value
	}
	// The transaction's own writes overlay the snapshot, as in bbolt.
	for k, v := range t.writes {
		if !strings.HasPrefix(k, from) {
			continue
		}
		if v == nil {
			delete(vals, k)
		} else {
			vals[k] = v
		}
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		_, name, _ := t.b.split(k)
		if err := fn(name, vals[k]); err != nil {
			return err
		}
	}
	return nil
}

// scanChunk is how many keys one range read of scan fetches.
const scanChunk = 256

func (t *etcdTx) scan(bucket, after string, fn func(string, []byte) (bool, error)) error {
	if !t.readOnly {
		return errors.New("store: scan in a writing transaction")
	}
	end := clientv3.GetPrefixRangeEnd(t.b.key(bucket, ""))
	from := t.b.key(bucket, "")
	if after != "" {
		from = t.b.key(bucket, after) + "\x00" // the first key after it
	}
	for {
		resp, err := t.fetch(from, clientv3.WithRange(end), clientv3.WithLimit(scanChunk))
		if err != nil {
			return err
		}
		for _, kv := range resp.Kvs {
			_, name, _ := t.b.split(string(kv.Key))
			more, err := fn(name, kv.Value)
			if err != nil || !more {
				return err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// commit writes the buffered changes if nothing the transaction read has
// changed since; ok is false when something has (the caller retries).
func (t *etcdTx) commit() (rev int64, ok bool, err error) {
	if len(t.writes) == 0 {
		return 0, true, nil
	}
	var cmps []clientv3.Cmp
	for k, mod := range t.reads {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", mod))
	}
	for bucket, mod := range t.ranges {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(t.b.mark(bucket)), "=", mod))
	}
	var ops []clientv3.Op
	for k, v := range t.writes {
		if v == nil {
			ops = append(ops, clientv3.OpDelete(k))
		} else {
			ops = append(ops, clientv3.OpPut(k, string(v)))
		}
	}
	for bucket := range t.written {
		ops = append(ops, clientv3.OpPut(t.b.mark(bucket), ""))
	}
	var resp *clientv3.TxnResponse
	err = t.b.do("write", func(ctx context.Context) error {
		var err error
		resp, err = t.b.c.Txn(ctx).If(cmps...).Then(ops...).Commit()
		return err
	})
	if err != nil {
		return 0, false, err
	}
	return resp.Header.Revision, resp.Succeeded, nil
}
