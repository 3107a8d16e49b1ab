package store

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/internal/names"
)

// Ownership ties a reservation to the owner that made it. An empty Owner is
// a reservation made by hand without one: anyone may use it, as before
// owners existed.
type Ownership struct {
	// Owner is opaque to the edge; the operator sends "<cluster-id>/<namespace>".
	Owner string `json:"owner,omitempty"`
	// SharedWith lists the other owners allowed to use the address.
	SharedWith []string `json:"shared_with,omitempty"`
}

// Allows reports whether owner may use the address.
func (o Ownership) Allows(owner string) bool {
	return o.Owner == "" || o.Owner == owner || slices.Contains(o.SharedWith, owner)
}

// UnderPrefix reports whether owner is prefix itself or lies under it,
// "<prefix>/...": the owners an API key bound to prefix acts for. A
// cluster id prefix "c1" covers "c1/demo", never "c10/demo".
func UnderPrefix(owner, prefix string) bool {
	return prefix != "" && (owner == prefix || strings.HasPrefix(owner, prefix+"/"))
}

// Claim records that Owner holds keys for a bare subdomain no reservation
// holds. It outlives sessions and restarts and goes with the owner's last
// key for the address, so a dropped session never frees the address.
type Claim struct {
	Address   string    `json:"address"`
	Owner     string    `json:"owner"`
	CreatedAt time.Time `json:"created_at"`
}

// OwnedError refuses the use of an address that another owner holds.
type OwnedError struct {
	Address string
	Owner   string
	// Claim: the owner holds a bare subdomain by its keys' claim, not by a
	// reservation, so it has nothing to share the address from.
	Claim bool
}

func (e *OwnedError) Error() string {
	return fmt.Sprintf("address %s is owned by %s", e.Address, e.Owner)
}

// hostOwner says whether a reservation holds host, and refuses owner with
// an *OwnedError when it may not use host: a reserved domain decides by its
// Ownership, otherwise a claim by its owner. A name nobody holds is decided
// by the nearest held name that covers it: for a wildcard "*.parent" its
// parent, then for any name the wildcards above it (names.Covering), so
// an owner's wildcard keeps the names under it that nobody held before,
// and a name held before a wildcard over it stays its holder's.
func hostOwner(tx tx, host, owner string) (reserved bool, err error) {
	reserved, held, err := nameOwner(tx, host, owner)
	if err != nil || held {
		return reserved, err
	}
	var covers []string
	if parent, ok := names.WildcardParent(host); ok {
		covers = append(covers, parent)
	}
	names.Covering(host, func(w string) bool { covers = append(covers, w); return true })
	for _, c := range covers {
		if _, held, err := nameOwner(tx, c, owner); err != nil || held {
			return false, err
		}
	}
	return false, nil
}

// nameOwner reads who holds name itself (its Domain, else its claim) and
// refuses owner with an *OwnedError when that holder does not allow it.
func nameOwner(tx tx, name, owner string) (reserved, held bool, err error) {
	d, err := get[Domain](tx, bucketDomains, name)
	if err == nil {
		if !d.Allows(owner) {
			return true, true, &OwnedError{Address: name, Owner: d.Owner}
		}
		return true, true, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return false, false, err
	}
	c, err := get[Claim](tx, bucketClaims, name)
	if errors.Is(err, ErrNotFound) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	if c.Owner != owner {
		return false, true, &OwnedError{Address: name, Owner: c.Owner, Claim: true}
	}
	return false, true, nil
}

// endpointOwner returns the refusal for owner using the TCP endpoint an
// alias or port names, or nil (also when no endpoint holds it: binding
// will fail on its own).
func endpointOwner(tx tx, addr, owner string) error {
	var ep TCPEndpoint
	var err error
	if port, perr := strconv.Atoi(addr); perr == nil {
		err = ErrNotFound
		eps, lerr := list[TCPEndpoint](tx, bucketTCP)
		if lerr != nil {
			return lerr
		}
		for _, e := range eps {
			if e.Port == port {
				ep, err = e, nil
			}
		}
	} else {
		ep, err = get[TCPEndpoint](tx, bucketTCP, addr)
	}
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !ep.Allows(owner) {
		return &OwnedError{Address: ep.Alias, Owner: ep.Owner}
	}
	return nil
}

// CheckHost says whether owner may serve host: nil, an *OwnedError, or a
// storage error. The SSH server asks it at every bind.
func (s *Store) CheckHost(host, owner string) error {
	return s.be.view(func(tx tx) error {
		_, err := hostOwner(tx, host, owner)
		return err
	})
}

// HostHolder is who holds host: the owner of its reservation (a Domain),
// else of its claim (the first owner of a key for it). held is false when
// neither exists; a reservation made without an owner is held by "".
func (s *Store) HostHolder(host string) (owner string, held bool, err error) {
	err = s.be.view(func(tx tx) error {
		d, err := get[Domain](tx, bucketDomains, host)
		if err == nil {
			owner, held = d.Owner, true
			return nil
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
		c, err := get[Claim](tx, bucketClaims, host)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		owner, held = c.Owner, true
		return nil
	})
	return owner, held, err
}

// IssueTunnelKey stores a new tunnel key after checking that its owner may
// use its address. With claimable set (a bare subdomain of the base
// domain), the first owner to get a key for an address no reservation
// holds claims it. Check, claim and insert are one transaction, so two
// owners racing for an address cannot both win.
func (s *Store) IssueTunnelKey(k TunnelKey, claimable bool) error {
	return s.updateHosts(func(tx tx) error { return issueKey(tx, k, claimable) },
		func(x *hostIndex) { x.addKey(k, 1) })
}

// Issue is one key of IssueTunnelKeys: the record and whether its
// address may be claimed (see IssueTunnelKey).
type Issue struct {
	Key       TunnelKey
	Claimable bool
}

// issueChunk bounds the keys of one transaction: each reads a few records
// and writes one or two, and etcd refuses a transaction of more than 128
// operations (its --max-txn-ops default).
const issueChunk = 25

// IssueTunnelKeys issues many keys, each checked as IssueTunnelKey checks
// it, in a few transactions rather than one each: a refusal of one (an
// *OwnedError) is its own and leaves the others issued. errs[i] is the
// outcome of keys[i]. A storage error fails the keys of its transaction.
func (s *Store) IssueTunnelKeys(keys []Issue) (errs []error) {
	errs = make([]error, len(keys))
	for from := 0; from < len(keys); from += issueChunk {
		chunk := keys[from:min(from+issueChunk, len(keys))]
		out := errs[from : from+len(chunk)]
		err := s.updateHosts(func(tx tx) error {
			// An etcd transaction that lost a race runs again from here.
			clear(out)
			for i, k := range chunk {
				err := issueKey(tx, k.Key, k.Claimable)
				if _, refused := errors.AsType[*OwnedError](err); refused {
					out[i] = err
					continue
				}
				if err != nil {
					return err
				}
			}
			return nil
		}, func(x *hostIndex) {
			for i, k := range chunk {
				if out[i] == nil {
					x.addKey(k.Key, 1)
				}
			}
		})
		if err != nil {
			for i := range out {
				out[i] = err
			}
		}
	}
	return errs
}

// issueKey checks that k's owner may use its address, claims a claimable
// one, and stores k, within tx.
func issueKey(tx tx, k TunnelKey, claimable bool) error {
	if k.Address != "" {
		if k.Protocol == "tcp" {
			if err := endpointOwner(tx, k.Address, k.Owner); err != nil {
				return err
			}
		} else {
			reserved, err := hostOwner(tx, k.Address, k.Owner)
			if err != nil {
				return err
			}
			if claimable && !reserved && k.Owner != "" {
				c := Claim{Address: k.Address, Owner: k.Owner, CreatedAt: k.CreatedAt}
				if err := put(tx, bucketClaims, k.Address, c, false); err != nil {
					return err
				}
			}
		}
	}
	return put(tx, bucketTunnelKeys, k.ID, k, true)
}

// RevokeTunnelKey removes a tunnel key and returns it; the owner's claim
// on its address goes with the owner's last key for that address.
func (s *Store) RevokeTunnelKey(id string) (TunnelKey, error) {
	var k TunnelKey
	err := s.updateHosts(func(tx tx) error {
		var err error
		if k, err = get[TunnelKey](tx, bucketTunnelKeys, id); err != nil {
			return err
		}
		if err := del(tx, bucketTunnelKeys, id); err != nil {
			return err
		}
		if k.Protocol == "tcp" || k.Address == "" {
			return nil
		}
		c, err := get[Claim](tx, bucketClaims, k.Address)
		if errors.Is(err, ErrNotFound) || (err == nil && c.Owner != k.Owner) {
			return nil
		}
		if err != nil {
			return err
		}
		others, err := list[TunnelKey](tx, bucketTunnelKeys)
		if err != nil {
			return err
		}
		for _, o := range others {
			if o.Protocol == k.Protocol && o.Address == k.Address && o.Owner == k.Owner {
				return nil
			}
		}
		return del(tx, bucketClaims, k.Address)
	}, func(x *hostIndex) { x.addKey(k, -1) })
	return k, err
}

// ListClaims returns every address claim, ordered by address.
func (s *Store) ListClaims() ([]Claim, error) { return listAll[Claim](s, bucketClaims) }

// update applies change to the record under key in one transaction, so a
// concurrent update of other fields is never lost.
func update[T any](s *Store, bucket string, key string, change func(*T) error) (T, error) {
	var out T
	err := s.write(func(tx tx) error {
		var err error
		if out, err = get[T](tx, bucket, key); err != nil {
			return err
		}
		if err := change(&out); err != nil {
			return err
		}
		return put(tx, bucket, key, out, false)
	})
	return out, err
}

// ChangeDomain applies change to the domain name atomically; the host
// index follows (verification changes what the public side serves).
func (s *Store) ChangeDomain(name string, change func(*Domain) error) (Domain, error) {
	var out Domain
	err := s.updateHosts(func(tx tx) error {
		var err error
		if out, err = get[Domain](tx, bucketDomains, name); err != nil {
			return err
		}
		if err := change(&out); err != nil {
			return err
		}
		return put(tx, bucketDomains, name, out, false)
	}, func(x *hostIndex) { x.setDomain(out) })
	return out, err
}

// ChangeTCPEndpoint applies change to the endpoint alias atomically.
func (s *Store) ChangeTCPEndpoint(alias string, change func(*TCPEndpoint) error) (TCPEndpoint, error) {
	return update(s, bucketTCP, alias, change)
}
