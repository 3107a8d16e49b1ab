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
	domains, err := s.ListDomains()
	if err != nil {
		return out, err
	}
	for _, d := range domains {
		moved := false
		nd, err := s.ChangeDomain(d.Name, func(cur *Domain) error {
			moved = cur.rehome(from, to)
			return nil
		})
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		if moved {
			out.Domains = append(out.Domains, nd)
		}
	}
	eps, err := s.ListTCPEndpoints()
	if err != nil {
		return out, err
	}
	for _, e := range eps {
		moved := false
		ne, err := s.ChangeTCPEndpoint(e.Alias, func(cur *TCPEndpoint) error {
			moved = cur.rehome(from, to)
			return nil
		})
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		if moved {
			out.TCPEndpoints = append(out.TCPEndpoints, ne)
		}
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
