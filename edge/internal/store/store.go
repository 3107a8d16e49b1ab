// Package store persists the edge's state: API keys and tunnel keys
// (hashes only), reserved domains and TCP endpoints, address claims, and
// named secrets sealed by edge/internal/secrets (secrets.go). It lives in one bbolt
// file (the default, for one edge) or in etcd, shared by the nodes of a
// cluster (etcd.go). No key is kept in it: the SSH host key and the
// secrets keys live in their own files (edge/server), and an old
// database's copy of the host key is removed by DropLegacyHostKey. Values
// are JSON so the state stays readable with bbolt's or etcd's tools and
// fields can be added without a migration.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

var (
	// ErrNotFound is returned when a record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists is returned when creating a record whose name is taken.
	ErrExists = errors.New("already exists")
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
	// OwnerPrefix binds the key to the owners under it (a cluster id: the
	// owners "<cluster-id>/<namespace>"): it creates, changes and deletes
	// only reservations and tunnel keys those owners hold. Empty: the key
	// names whatever owner it acts for.
	OwnerPrefix string `json:"owner_prefix,omitempty"`
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
	// MaxSessions is the size of the key's session pool: how many agent
	// replicas may serve its address at once. 0 takes the edge's default.
	MaxSessions int `json:"max_sessions,omitempty"`
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
	// AccessPolicy names a policy of the domain's owner that guards it,
	// whoever binds it ("" for none).
	AccessPolicy string `json:"access_policy,omitempty"`
	Ownership
	CreatedAt time.Time `json:"created_at"`
}

// AccessPolicyID is the id of the domain's access policy, or "".
func (d Domain) AccessPolicyID() string {
	if d.AccessPolicy == "" {
		return ""
	}
	return d.Owner + "/" + d.AccessPolicy
}

// TCPEndpoint is a reserved public TCP port.
type TCPEndpoint struct {
	Alias string `json:"alias"`
	Port  int    `json:"port"`
	Ownership
	CreatedAt time.Time `json:"created_at"`
}

// Store is a handle on the edge's state; safe for concurrent use.
type Store struct {
	be backend
	// bolt is set for the embedded store, etcd for a cluster's.
	bolt *boltBackend
	etcd *etcdBackend

	// hosts indexes the host names that keys and domains serve (hosts.go).
	hostsMu sync.Mutex
	hosts   atomic.Pointer[hostIndex]
}

// Close releases the store (the bbolt file, or the etcd client).
func (s *Store) Close() error { return s.be.close() }

// Shared reports whether other edge nodes share this store (etcd).
func (s *Store) Shared() bool { return s.etcd != nil }

// put stores v under key; with create set it fails with ErrExists when the
// key is present, which makes "reserve a name" a single atomic step.
func put(tx tx, bucket, key string, v any, create bool) error {
	if create {
		cur, err := tx.get(bucket, key)
		if err != nil {
			return err
		}
		if cur != nil {
			return ErrExists
		}
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %s/%s: %w", bucket, key, err)
	}
	return tx.put(bucket, key, data)
}

func get[T any](tx tx, bucket, key string) (T, error) {
	var out T
	data, err := tx.get(bucket, key)
	if err != nil {
		return out, err
	}
	if data == nil {
		return out, ErrNotFound
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return out, fmt.Errorf("decoding %s/%s: %w", bucket, key, err)
	}
	return out, nil
}

func list[T any](tx tx, bucket string) ([]T, error) {
	out := []T{}
	err := tx.each(bucket, "", func(k string, v []byte) error {
		var item T
		if err := json.Unmarshal(v, &item); err != nil {
			return fmt.Errorf("decoding %s/%s: %w", bucket, k, err)
		}
		out = append(out, item)
		return nil
	})
	return out, err
}

func del(tx tx, bucket, key string) error {
	cur, err := tx.get(bucket, key)
	if err != nil {
		return err
	}
	if cur == nil {
		return ErrNotFound
	}
	return tx.del(bucket, key)
}

func getOne[T any](s *Store, bucket, key string) (T, error) {
	var out T
	err := s.be.view(func(tx tx) error {
		var err error
		out, err = get[T](tx, bucket, key)
		return err
	})
	return out, err
}

func listAll[T any](s *Store, bucket string) ([]T, error) {
	var out []T
	err := s.be.view(func(tx tx) error {
		var err error
		out, err = list[T](tx, bucket)
		return err
	})
	return out, err
}

func (s *Store) write(fn func(tx) error) error {
	_, err := s.be.update(fn)
	return err
}

func (s *Store) create(bucket, key string, v any) error {
	return s.write(func(tx tx) error { return put(tx, bucket, key, v, true) })
}

func (s *Store) remove(bucket, key string) error {
	return s.write(func(tx tx) error { return del(tx, bucket, key) })
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
		func(tx tx) error { return put(tx, bucketTunnelKeys, k.ID, k, true) },
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

// ScanTunnelKeys calls fn for the tunnel keys whose id sorts after
// after, in id order, until fn returns false. A page of a list costs the
// keys it looks at, not every key: reading a list of N keys in pages of P
// reads each key once, not N/P times.
func (s *Store) ScanTunnelKeys(after string, fn func(TunnelKey) bool) error {
	return s.be.view(func(tx tx) error {
		return tx.scan(bucketTunnelKeys, after, func(k string, v []byte) (bool, error) {
			var rec TunnelKey
			if err := json.Unmarshal(v, &rec); err != nil {
				return false, fmt.Errorf("decoding %s/%s: %w", bucketTunnelKeys, k, err)
			}
			return fn(rec), nil
		})
	})
}

// UpdateTunnelKey rewrites a tunnel key with update, in one transaction;
// ErrNotFound when it does not exist, update's error as is.
// The host index follows the key, in case update changes its address.
func (s *Store) UpdateTunnelKey(id string, update func(*TunnelKey) error) (TunnelKey, error) {
	var before, out TunnelKey
	err := s.updateHosts(func(tx tx) error {
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

// UpdateTunnelKeys rewrites many tunnel keys with update, a few
// transactions for all of them (see IssueTunnelKeys): out[i] and errs[i]
// are ids[i]'s, ErrNotFound for a key that does not exist, update's error
// as is for a key it refused; a storage error fails the keys of its
// transaction.
func (s *Store) UpdateTunnelKeys(ids []string, update func(*TunnelKey) error) (out []TunnelKey, errs []error) {
	out, errs = make([]TunnelKey, len(ids)), make([]error, len(ids))
	for from := 0; from < len(ids); from += issueChunk {
		chunk := ids[from:min(from+issueChunk, len(ids))]
		before := make([]TunnelKey, len(chunk))
		after, refused := out[from:from+len(chunk)], errs[from:from+len(chunk)]
		err := s.updateHosts(func(tx tx) error {
			clear(refused)
			for i, id := range chunk {
				k, err := get[TunnelKey](tx, bucketTunnelKeys, id)
				if errors.Is(err, ErrNotFound) {
					refused[i] = err
					continue
				}
				if err != nil {
					return err
				}
				before[i] = k
				if err := update(&k); err != nil {
					refused[i] = err
					continue
				}
				after[i] = k
				if err := put(tx, bucketTunnelKeys, id, k, false); err != nil {
					return err
				}
			}
			return nil
		}, func(x *hostIndex) {
			for i := range chunk {
				if refused[i] == nil {
					x.addKey(before[i], -1)
					x.addKey(after[i], 1)
				}
			}
		})
		if err != nil {
			for i := range refused {
				refused[i] = err
			}
		}
	}
	return out, errs
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
	return s.updateHosts(func(tx tx) error {
		c, err := get[Claim](tx, bucketClaims, d.Name)
		if err == nil && c.Owner != d.Owner {
			return &OwnedError{Address: d.Name, Owner: c.Owner, Claim: true}
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		return put(tx, bucketDomains, d.Name, d, true)
	}, func(x *hostIndex) { x.setDomain(d) })
}

// UpdateDomain overwrites an existing domain (verification results).
func (s *Store) UpdateDomain(d Domain) error {
	return s.updateHosts(func(tx tx) error {
		if _, err := get[Domain](tx, bucketDomains, d.Name); err != nil {
			return err
		}
		return put(tx, bucketDomains, d.Name, d, false)
	}, func(x *hostIndex) { x.setDomain(d) })
}

// GetDomain returns a domain by full name.
func (s *Store) GetDomain(name string) (Domain, error) { return getOne[Domain](s, bucketDomains, name) }

// ListDomains returns all domains, ordered by name.
func (s *Store) ListDomains() ([]Domain, error) { return listAll[Domain](s, bucketDomains) }

// DeleteDomain releases a domain once may, given its ownership inside
// the transaction, allows it (nil: always), so that a release checks the
// very record it removes: an address re-reserved by another owner since
// the caller looked is refused, not released.
func (s *Store) DeleteDomain(name string, may func(Ownership) error) error {
	return s.updateHosts(
		func(tx tx) error {
			d, err := get[Domain](tx, bucketDomains, name)
			if err != nil {
				return err
			}
			if may != nil {
				if err := may(d.Ownership); err != nil {
					return err
				}
			}
			return tx.del(bucketDomains, name)
		},
		func(x *hostIndex) { delete(x.domains, name) })
}

// GetTCPEndpoint returns an endpoint by alias.
func (s *Store) GetTCPEndpoint(alias string) (TCPEndpoint, error) {
	return getOne[TCPEndpoint](s, bucketTCP, alias)
}

// ListTCPEndpoints returns all endpoints, ordered by alias.
func (s *Store) ListTCPEndpoints() ([]TCPEndpoint, error) { return listAll[TCPEndpoint](s, bucketTCP) }

// DeleteTCPEndpoint releases an endpoint and its port once may, given its
// ownership inside the transaction, allows it (nil: always), and returns
// the endpoint it released.
func (s *Store) DeleteTCPEndpoint(alias string, may func(Ownership) error) (TCPEndpoint, error) {
	var e TCPEndpoint
	err := s.write(func(tx tx) error {
		var err error
		if e, err = get[TCPEndpoint](tx, bucketTCP, alias); err != nil {
			return err
		}
		if may != nil {
			if err := may(e.Ownership); err != nil {
				return err
			}
		}
		return tx.del(bucketTCP, alias)
	})
	return e, err
}

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
	err := s.write(func(tx tx) error {
		if _, err := get[TCPEndpoint](tx, bucketTCP, alias); err == nil {
			return ErrExists
		} else if !errors.Is(err, ErrNotFound) {
			return err
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
