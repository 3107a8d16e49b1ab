package store

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// boltBackend keeps the state in one bbolt file, the default for a single
// edge: transactions are bbolt's own, serialised by its writer lock.
type boltBackend struct {
	db   *bolt.DB
	path string
}

var metaHostKey = []byte("ssh_host_key")

// DBFile is the bbolt database's name in the edge's data directory.
const DBFile = "edge.db"

// Open opens (creating if needed) edge.db in dir.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating data dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, DBFile)
	db, err := openDB(path)
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists([]byte(b)); err != nil {
				return fmt.Errorf("creating bucket %s: %w", b, err)
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("initialising store %s: %w", path, err)
	}
	b := &boltBackend{db: db, path: path}
	s := &Store{be: b, bolt: b}
	var idx *hostIndex
	if err := b.view(func(tx tx) error { idx, err = buildHostIndex(tx); return err }); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("initialising store %s: %w", path, err)
	}
	s.hosts.Store(idx)
	return s, nil
}

func openDB(path string) (*bolt.DB, error) {
	// The timeout turns "another tuna-edge holds the file" into an error
	// instead of a hang.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	return db, nil
}

func (b *boltBackend) view(fn func(tx) error) error {
	return b.db.View(func(t *bolt.Tx) error { return fn(boltTx{t}) })
}

func (b *boltBackend) update(fn func(tx) error) (int64, error) {
	return 0, b.db.Update(func(t *bolt.Tx) error { return fn(boltTx{t}) })
}

func (b *boltBackend) close() error { return b.db.Close() }

type boltTx struct{ t *bolt.Tx }

func (x boltTx) get(bucket, key string) ([]byte, error) {
	return x.t.Bucket([]byte(bucket)).Get([]byte(key)), nil
}

func (x boltTx) put(bucket, key string, value []byte) error {
	return x.t.Bucket([]byte(bucket)).Put([]byte(key), value)
}

func (x boltTx) del(bucket, key string) error {
	return x.t.Bucket([]byte(bucket)).Delete([]byte(key))
}

func (x boltTx) each(bucket, prefix string, fn func(string, []byte) error) error {
	// Keys are collected first: bbolt forbids changing a bucket while a
	// cursor walks it, and fn may write.
	type kv struct {
		k string
		v []byte
	}
	var all []kv
	c := x.t.Bucket([]byte(bucket)).Cursor()
	p := []byte(prefix)
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		all = append(all, kv{string(k), append([]byte(nil), v...)})
	}
	for _, e := range all {
		if err := fn(e.k, e.v); err != nil {
			return err
		}
	}
	return nil
}

func (x boltTx) scan(bucket, after string, fn func(string, []byte) (bool, error)) error {
	c := x.t.Bucket([]byte(bucket)).Cursor()
	k, v := c.Seek([]byte(after))
	if k != nil && string(k) == after {
		k, v = c.Next()
	}
	for ; k != nil; k, v = c.Next() {
		more, err := fn(string(k), v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// LegacyHostKey returns the SSH host key (PEM) that edges before the
// host key file kept in the database, or ErrNotFound. It is read only to
// move the key out. Only a bbolt store can hold one.
func (s *Store) LegacyHostKey() ([]byte, error) {
	if s.bolt == nil {
		return nil, ErrNotFound
	}
	var out []byte
	err := s.bolt.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket([]byte(bucketMeta)).Get(metaHostKey)
		if v == nil {
			return ErrNotFound
		}
		out = append([]byte(nil), v...)
		return nil
	})
	return out, err
}

// SetLegacyHostKey writes a host key where old edges kept it. Only tests
// use it, to build the database an old edge left behind.
func (s *Store) SetLegacyHostKey(pemBytes []byte) error {
	if s.bolt == nil {
		return fmt.Errorf("only a bbolt store holds a legacy host key")
	}
	return s.bolt.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketMeta)).Put(metaHostKey, pemBytes)
	})
}

// DropLegacyHostKey deletes the database's copy of the host key and
// compacts the file. Deleting alone is not enough: bbolt leaves a freed
// page's bytes in the file until the page is reused, so the private key
// would still be readable in a copied database. Compaction rewrites the
// live data into a new file, which replaces the old one. It must run before
// the store is shared (it reopens the database).
func (s *Store) DropLegacyHostKey() error {
	b := s.bolt
	if b == nil {
		return nil
	}
	err := b.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketMeta)).Delete(metaHostKey)
	})
	if err != nil {
		return fmt.Errorf("deleting the host key from %s: %w", b.path, err)
	}
	tmp := b.path + ".compact"
	_ = os.Remove(tmp) // left by a crash during an earlier attempt
	dst, err := openDB(tmp)
	if err != nil {
		return err
	}
	if err := bolt.Compact(dst, b.db, 0); err != nil {
		_ = dst.Close()
		_ = os.Remove(tmp)
		return fmt.Errorf("compacting %s: %w", b.path, err)
	}
	if err := dst.Close(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("compacting %s: %w", b.path, err)
	}
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("closing %s to replace it: %w", b.path, err)
	}
	if err := os.Rename(tmp, b.path); err != nil {
		return fmt.Errorf("replacing %s with its compacted copy: %w", b.path, err)
	}
	db, err := openDB(b.path)
	if err != nil {
		return err
	}
	b.db = db
	return nil
}
