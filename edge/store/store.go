// Package store persists the edge's state in one bbolt file: API keys and
// tunnel keys (hashes only), reserved domains and TCP endpoints, and named
// secrets sealed by edge/secrets (secrets.go). No key is kept in it: the
// SSH host key and the secrets keys live in their own files (edge/server),
// and an old database's copy of the host key is removed by
// DropLegacyHostKey. Values are JSON so the file stays readable with
// bbolt's tools and fields can be added without a migration.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

var (
	// ErrNotFound is returned when a record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists is returned when creating a record whose name is taken.
	ErrExists = errors.New("already exists")
)

var (
	bucketAPIKeys    = []byte("api_keys")
	bucketTunnelKeys = []byte("tunnel_keys")
	bucketDomains    = []byte("domains")
	bucketTCP        = []byte("tcp_endpoints")
	bucketMeta       = []byte("meta")
	bucketClaims     = []byte("address_claims")
	allBuckets       = [][]byte{bucketAPIKeys, bucketTunnelKeys, bucketDomains, bucketTCP, bucketMeta, bucketClaims,
		bucketSecrets, bucketSecretValues}

	metaHostKey = []byte("ssh_host_key")
)

// APIKey is a stored API key. Hash is SHA-256 of the whole key string.
type APIKey struct {
	ID        string    `json:"id"`
	Name      string    `json:"name,omitempty"`
	Scopes    []string  `json:"scopes"`
	Hash      []byte    `json:"hash"`
	CreatedAt time.Time `json:"created_at"`
	// SecretPrefix confines the key's secrets scopes to names starting
	// with it; empty: every secret.
	SecretPrefix string `json:"secret_prefix,omitempty"`
}

// TunnelKey is a stored tunnel key.
type TunnelKey struct {
	ID       string `json:"id"`
	Protocol string `json:"protocol"`
	// Address is a full host name (http) or an alias or port (tcp); empty
	// means any address.
	Address string            `json:"address,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	// Owner is who the key was issued for ("<cluster-id>/<namespace>" from
	// the operator); empty for keys issued without one.
	Owner     string    `json:"owner,omitempty"`
	Hash      []byte    `json:"hash"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is when the key stops working unless renewed; zero means
	// never (the edge's TTL is off).
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// TTL is the lifetime each renewal gives, recorded so clients can tell
	// when half of it is gone.
	TTL time.Duration `json:"ttl,omitempty"`
}

// Expired reports whether the key's expiry has passed at now.
func (k TunnelKey) Expired(now time.Time) bool {
	return !k.ExpiresAt.IsZero() && !now.Before(k.ExpiresAt)
}

// Domain is a reserved host name.
type Domain struct {
	Name      string `json:"name"`
	Subdomain string `json:"subdomain,omitempty"`
	Custom    bool   `json:"custom"`
	Verified  bool   `json:"verified"`
	// Token is the value expected in the _tuna-challenge TXT record.
	Token       string `json:"token,omitempty"`
	VerifyError string `json:"verify_error,omitempty"`
	Ownership
	CreatedAt time.Time `json:"created_at"`
}

// TCPEndpoint is a reserved public TCP port.
type TCPEndpoint struct {
	Alias string `json:"alias"`
	Port  int    `json:"port"`
	Ownership
	CreatedAt time.Time `json:"created_at"`
}

// Store is a handle on the database file; safe for concurrent use.
type Store struct {
	db   *bolt.DB
	path string

	// hosts indexes the host names that keys and domains serve (hosts.go).
	hostsMu sync.Mutex
	hosts   atomic.Pointer[hostIndex]
}

// Open opens (creating if needed) edge.db in dir.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating data dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, "edge.db")
	db, err := openDB(path)
	if err != nil {
		return nil, err
	}
	var idx *hostIndex
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return fmt.Errorf("creating bucket %s: %w", b, err)
			}
		}
		var err error
		idx, err = buildHostIndex(tx)
		return err
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("initialising store %s: %w", path, err)
	}
	s := &Store{db: db, path: path}
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

// Close closes the database file.
func (s *Store) Close() error { return s.db.Close() }

// put stores v under key; with create set it fails with ErrExists when the
// key is present, which makes "reserve a name" a single atomic step.
func put(tx *bolt.Tx, bucket []byte, key string, v any, create bool) error {
	b := tx.Bucket(bucket)
	if create && b.Get([]byte(key)) != nil {
		return ErrExists
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %s/%s: %w", bucket, key, err)
	}
	return b.Put([]byte(key), data)
}

func get[T any](tx *bolt.Tx, bucket []byte, key string) (T, error) {
	var out T
	data := tx.Bucket(bucket).Get([]byte(key))
	if data == nil {
		return out, ErrNotFound
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return out, fmt.Errorf("decoding %s/%s: %w", bucket, key, err)
	}
	return out, nil
}

func list[T any](tx *bolt.Tx, bucket []byte) ([]T, error) {
	out := []T{}
	err := tx.Bucket(bucket).ForEach(func(k, v []byte) error {
		var item T
		if err := json.Unmarshal(v, &item); err != nil {
			return fmt.Errorf("decoding %s/%s: %w", bucket, k, err)
		}
		out = append(out, item)
		return nil
	})
	return out, err
}

func del(tx *bolt.Tx, bucket []byte, key string) error {
	b := tx.Bucket(bucket)
	if b.Get([]byte(key)) == nil {
		return ErrNotFound
	}
	return b.Delete([]byte(key))
}

func getOne[T any](s *Store, bucket []byte, key string) (T, error) {
	var out T
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = get[T](tx, bucket, key)
		return err
	})
	return out, err
}

func listAll[T any](s *Store, bucket []byte) ([]T, error) {
	var out []T
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = list[T](tx, bucket)
		return err
	})
	return out, err
}

func (s *Store) create(bucket []byte, key string, v any) error {
	return s.db.Update(func(tx *bolt.Tx) error { return put(tx, bucket, key, v, true) })
}

func (s *Store) remove(bucket []byte, key string) error {
	return s.db.Update(func(tx *bolt.Tx) error { return del(tx, bucket, key) })
}

// CreateAPIKey stores a new API key record.
func (s *Store) CreateAPIKey(k APIKey) error { return s.create(bucketAPIKeys, k.ID, k) }

// GetAPIKey returns an API key by id.
func (s *Store) GetAPIKey(id string) (APIKey, error) { return getOne[APIKey](s, bucketAPIKeys, id) }

// ListAPIKeys returns all API keys, ordered by id.
func (s *Store) ListAPIKeys() ([]APIKey, error) { return listAll[APIKey](s, bucketAPIKeys) }

// DeleteAPIKey removes an API key.
func (s *Store) DeleteAPIKey(id string) error { return s.remove(bucketAPIKeys, id) }

// CreateTunnelKey stores a new tunnel key record without ownership checks
// (IssueTunnelKey makes them).
func (s *Store) CreateTunnelKey(k TunnelKey) error {
	return s.updateHosts(
		func(tx *bolt.Tx) error { return put(tx, bucketTunnelKeys, k.ID, k, true) },
		func(x *hostIndex) { x.addKey(k, 1) })
}

// GetTunnelKey returns a tunnel key by id.
func (s *Store) GetTunnelKey(id string) (TunnelKey, error) {
	return getOne[TunnelKey](s, bucketTunnelKeys, id)
}

// ListTunnelKeys returns all tunnel keys, ordered by id.
func (s *Store) ListTunnelKeys() ([]TunnelKey, error) {
	return listAll[TunnelKey](s, bucketTunnelKeys)
}

// UpdateTunnelKey rewrites a tunnel key with update, in one transaction;
// ErrNotFound when it does not exist, update's error as is.
// The host index follows the key, in case update changes its address.
func (s *Store) UpdateTunnelKey(id string, update func(*TunnelKey) error) (TunnelKey, error) {
	var before, out TunnelKey
	err := s.updateHosts(func(tx *bolt.Tx) error {
		k, err := get[TunnelKey](tx, bucketTunnelKeys, id)
		if err != nil {
			return err
		}
		before = k
		if err := update(&k); err != nil {
			return err
		}
		out = k
		return put(tx, bucketTunnelKeys, id, k, false)
	}, func(x *hostIndex) {
		x.addKey(before, -1)
		x.addKey(out, 1)
	})
	return out, err
}

// DeleteTunnelKey removes a tunnel key, releasing its owner's claim with
// the owner's last key for the address.
func (s *Store) DeleteTunnelKey(id string) error {
	_, err := s.RevokeTunnelKey(id)
	return err
}

// CreateDomain reserves a domain; ErrExists when the name is taken, an
// *OwnedError when another owner claims it as a bare subdomain (reserving
// it would take the address from under the claimant's keys).
func (s *Store) CreateDomain(d Domain) error {
	return s.updateHosts(func(tx *bolt.Tx) error {
		c, err := get[Claim](tx, bucketClaims, d.Name)
		if err == nil && c.Owner != d.Owner {
			return &OwnedError{Address: d.Name, Owner: c.Owner}
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		return put(tx, bucketDomains, d.Name, d, true)
	}, func(x *hostIndex) { x.setDomain(d) })
}

// UpdateDomain overwrites an existing domain (verification results).
func (s *Store) UpdateDomain(d Domain) error {
	return s.updateHosts(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketDomains).Get([]byte(d.Name)) == nil {
			return ErrNotFound
		}
		return put(tx, bucketDomains, d.Name, d, false)
	}, func(x *hostIndex) { x.setDomain(d) })
}

// GetDomain returns a domain by full name.
func (s *Store) GetDomain(name string) (Domain, error) { return getOne[Domain](s, bucketDomains, name) }

// ListDomains returns all domains, ordered by name.
func (s *Store) ListDomains() ([]Domain, error) { return listAll[Domain](s, bucketDomains) }

// DeleteDomain releases a domain.
func (s *Store) DeleteDomain(name string) error {
	return s.updateHosts(
		func(tx *bolt.Tx) error { return del(tx, bucketDomains, name) },
		func(x *hostIndex) { delete(x.domains, name) })
}

// GetTCPEndpoint returns an endpoint by alias.
func (s *Store) GetTCPEndpoint(alias string) (TCPEndpoint, error) {
	return getOne[TCPEndpoint](s, bucketTCP, alias)
}

// ListTCPEndpoints returns all endpoints, ordered by alias.
func (s *Store) ListTCPEndpoints() ([]TCPEndpoint, error) { return listAll[TCPEndpoint](s, bucketTCP) }

// DeleteTCPEndpoint releases an endpoint and its port.
func (s *Store) DeleteTCPEndpoint(alias string) error { return s.remove(bucketTCP, alias) }

// TCPEndpointByPort finds the endpoint holding port.
func (s *Store) TCPEndpointByPort(port int) (TCPEndpoint, error) {
	eps, err := s.ListTCPEndpoints()
	if err != nil {
		return TCPEndpoint{}, err
	}
	for _, e := range eps {
		if e.Port == port {
			return e, nil
		}
	}
	return TCPEndpoint{}, ErrNotFound
}

// PortPicker chooses the port of a new TCP endpoint, given the ports that
// are reserved already; it returns an error when none is left.
type PortPicker func(taken map[int]bool) (int, error)

// CreateTCPEndpoint reserves a port for e.Alias, chosen by pick, and
// returns e with its port. Lookup, choice and insert happen in one
// transaction, so two concurrent requests can never receive the same port.
func (s *Store) CreateTCPEndpoint(e TCPEndpoint, pick PortPicker) (TCPEndpoint, error) {
	alias := e.Alias
	var out TCPEndpoint
	err := s.db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketTCP).Get([]byte(alias)) != nil {
			return ErrExists
		}
		eps, err := list[TCPEndpoint](tx, bucketTCP)
		if err != nil {
			return err
		}
		taken := make(map[int]bool, len(eps))
		for _, e := range eps {
			taken[e.Port] = true
		}
		p, err := pick(taken)
		if err != nil {
			return err
		}
		out = e
		out.Port = p
		return put(tx, bucketTCP, alias, out, false)
	})
	return out, err
}

// LegacyHostKey returns the SSH host key (PEM) that edges before the
// host key file kept in the database, or ErrNotFound. It is read only to
// move the key out.
func (s *Store) LegacyHostKey() ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketMeta).Get(metaHostKey)
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
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(metaHostKey, pemBytes)
	})
}

// DropLegacyHostKey deletes the database's copy of the host key and
// compacts the file. Deleting alone is not enough: bbolt leaves a freed
// page's bytes in the file until the page is reused, so the private key
// would still be readable in a copied database. Compaction rewrites the
// live data into a new file, which replaces the old one. It must run before
// the store is shared (it reopens the database).
func (s *Store) DropLegacyHostKey() error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Delete(metaHostKey)
	})
	if err != nil {
		return fmt.Errorf("deleting the host key from %s: %w", s.path, err)
	}
	tmp := s.path + ".compact"
	_ = os.Remove(tmp) // left by a crash during an earlier attempt
	dst, err := openDB(tmp)
	if err != nil {
		return err
	}
	if err := bolt.Compact(dst, s.db, 0); err != nil {
		_ = dst.Close()
		_ = os.Remove(tmp)
		return fmt.Errorf("compacting %s: %w", s.path, err)
	}
	if err := dst.Close(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("compacting %s: %w", s.path, err)
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("closing %s to replace it: %w", s.path, err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("replacing %s with its compacted copy: %w", s.path, err)
	}
	db, err := openDB(s.path)
	if err != nil {
		return err
	}
	s.db = db
	return nil
}
