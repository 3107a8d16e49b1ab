package store

import (
	"errors"
	"slices"
	"strings"
)

// Transfer is what TransferOwners handed over: the reservations whose
// owner or shared_with changed (as they are now) and the claims it moved.
type Transfer struct {
	Domains      []Domain
	TCPEndpoints []TCPEndpoint
	Claims       []Claim
}

// Rehome maps owner from one owner prefix to another: from itself, or
// "<from>/<rest>", becomes to, or "<to>/<rest>"; ok is false for an owner
// not under from.
func Rehome(owner, from, to string) (string, bool) {
	if !UnderPrefix(owner, from) {
		return owner, false
	}
	return to + strings.TrimPrefix(owner, from), true
}

// rehome moves o's owner and shared_with entries from one prefix to
// another, and reports whether anything changed.
func (o *Ownership) rehome(from, to string) bool {
	changed := false
	if owner, ok := Rehome(o.Owner, from, to); ok {
		o.Owner, changed = owner, true
	}
	for i, w := range o.SharedWith {
		if nw, ok := Rehome(w, from, to); ok {
			o.SharedWith[i], changed = nw, true
		}
	}
	if changed {
		o.SharedWith = slices.Compact(slices.Sorted(slices.Values(o.SharedWith)))
	}
	return changed
}

// TransferOwners hands every reservation and claim of the owners under
// prefix from to the same owners under prefix to (a lost cluster's
// addresses to the cluster that replaces it): owners, and shared_with
// entries, are rewritten. Each record changes in its own transaction, so a
// transfer of any size fits etcd's limits; one interrupted part-way
// finishes when run again, since records already moved no longer match.
// Tunnel keys keep their owner: the old owners' keys lose the addresses.
func (s *Store) TransferOwners(from, to string) (Transfer, error) {
	var out Transfer
	var err error
	if out.Domains, err = moveOwners(s.ListDomains, func(d *Domain) (string, *Ownership) { return d.Name, &d.Ownership },
		s.ChangeDomain, from, to); err != nil {
		return out, err
	}
	if out.TCPEndpoints, err = moveOwners(s.ListTCPEndpoints, func(e *TCPEndpoint) (string, *Ownership) { return e.Alias, &e.Ownership },
		s.ChangeTCPEndpoint, from, to); err != nil {
		return out, err
	}
	claims, err := s.ListClaims()
	if err != nil {
		return out, err
	}
	for _, c := range claims {
		if _, ok := Rehome(c.Owner, from, to); !ok {
			continue
		}
		var moved Claim
		err := s.write(func(tx tx) error {
			cur, err := get[Claim](tx, bucketClaims, c.Address)
			if err != nil {
				return err
			}
			owner, ok := Rehome(cur.Owner, from, to)
			if !ok {
				return ErrNotFound
			}
			cur.Owner = owner
			moved = cur
			return put(tx, bucketClaims, c.Address, cur, false)
		})
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		out.Claims = append(out.Claims, moved)
	}
	return out, nil
}

// moveOwners rehomes the ownership of every record list returns, each in a
// transaction of its own (change), and returns the records that changed.
func moveOwners[T any](list func() ([]T, error), own func(*T) (string, *Ownership),
	change func(string, func(*T) error) (T, error), from, to string) ([]T, error) {
	recs, err := list()
	if err != nil {
		return nil, err
	}
	var out []T
	for i := range recs {
		name, _ := own(&recs[i])
		moved := false
		rec, err := change(name, func(cur *T) error {
			_, o := own(cur)
			moved = o.rehome(from, to)
			return nil
		})
		if errors.Is(err, ErrNotFound) {
			continue // released meanwhile
		}
		if err != nil {
			return out, err
		}
		if moved {
			out = append(out, rec)
		}
	}
	return out, nil
}
