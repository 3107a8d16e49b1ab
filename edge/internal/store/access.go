package store

import (
	"errors"
	"strings"
	"time"
)

// Access policies and the access keys are stored sealed by the secrets
// keyring (edge/internal/secrets): a policy holds an OIDC client secret, an
// htpasswd file or a links key, the keys seal sessions and sign
// assertions. Their metadata is in clear, so that lists read no secret.
// The uses of shareable links are counted here too, so every node of a
// cluster counts against one number.

// AccessPolicy is a stored access policy: who owns it, its name and
// digest in clear, the policy itself sealed.
type AccessPolicy struct {
	Owner     string    `json:"owner"`
	Name      string    `json:"name"`
	Digest    string    `json:"digest"`
	UpdatedAt time.Time `json:"updated_at"`
	Sealed
}

// ID is the policy's key: "<owner>/<name>".
func (p AccessPolicy) ID() string { return p.Owner + "/" + p.Name }

// SplitPolicyID is ID's inverse (a name holds no '/').
func SplitPolicyID(id string) (owner, name string) {
	i := strings.LastIndexByte(id, '/')
	if i < 0 {
		return "", id
	}
	return id[:i], id[i+1:]
}

// linkUse counts the uses of one link until it expires.
type linkUse struct {
	Uses    int       `json:"uses"`
	Expires time.Time `json:"expires"`
}

const accessKeysKey = "keys"

// ErrUsedUp is a link whose uses are all counted.
var ErrUsedUp = errors.New("used up")

// PutAccessPolicy creates or replaces a policy once may, given the stored
// one (nil: none), allows it. It reports whether it changed anything.
func (s *Store) PutAccessPolicy(p AccessPolicy, may func(old *AccessPolicy) error) (bool, error) {
	changed := false
	err := s.write(func(tx tx) error {
		changed = false
		old, err := get[AccessPolicy](tx, bucketAccessPolicies, p.ID())
		switch {
		case errors.Is(err, ErrNotFound):
			if err := may(nil); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			if err := may(&old); err != nil {
				return err
			}
			if old.Digest == p.Digest {
				return nil
			}
		}
		changed = true
		return put(tx, bucketAccessPolicies, p.ID(), p, false)
	})
	return changed, err
}

// GetAccessPolicy returns a policy by owner and name.
func (s *Store) GetAccessPolicy(owner, name string) (AccessPolicy, error) {
	return getOne[AccessPolicy](s, bucketAccessPolicies, owner+"/"+name)
}

// ListAccessPolicies returns every policy, ordered by owner and name.
func (s *Store) ListAccessPolicies() ([]AccessPolicy, error) {
	return listAll[AccessPolicy](s, bucketAccessPolicies)
}

// DeleteAccessPolicy removes a policy and the use counts of its links.
func (s *Store) DeleteAccessPolicy(owner, name string) error {
	id := owner + "/" + name
	return s.write(func(tx tx) error {
		if err := del(tx, bucketAccessPolicies, id); err != nil {
			return err
		}
		var uses []string
		if err := tx.each(bucketLinkUses, id+"/", func(k string, _ []byte) error {
			uses = append(uses, k)
			return nil
		}); err != nil {
			return err
		}
		for _, k := range uses {
			if err := tx.del(bucketLinkUses, k); err != nil {
				return err
			}
		}
		return nil
	})
}

// AccessKeys returns the sealed access keys, creating them with make when
// there are none (the first node to start makes them; the others read
// them).
func (s *Store) AccessKeys(make func() (Sealed, error)) (Sealed, error) {
	var out Sealed
	err := s.write(func(tx tx) error {
		cur, err := get[Sealed](tx, bucketAccessKeys, accessKeysKey)
		if err == nil {
			out = cur
			return nil
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
		if out, err = make(); err != nil {
			return err
		}
		return put(tx, bucketAccessKeys, accessKeysKey, out, false)
	})
	return out, err
}

// ChangeAccessKeys replaces the sealed access keys with what change makes
// of them, in one transaction (a rotation).
func (s *Store) ChangeAccessKeys(change func(Sealed) (Sealed, error)) (Sealed, error) {
	var out Sealed
	err := s.write(func(tx tx) error {
		cur, err := get[Sealed](tx, bucketAccessKeys, accessKeysKey)
		if err != nil {
			return err
		}
		if out, err = change(cur); err != nil {
			return err
		}
		return put(tx, bucketAccessKeys, accessKeysKey, out, false)
	})
	return out, err
}

// UseLink counts one use of the link id of a policy, unless max uses are
// counted (ErrUsedUp). Counts of expired links are removed on the way.
func (s *Store) UseLink(policy, id string, max int, expires time.Time) error {
	key := policy + "/" + id
	return s.write(func(tx tx) error {
		u, err := get[linkUse](tx, bucketLinkUses, key)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if u.Uses >= max {
			return ErrUsedUp
		}
		u.Uses++
		u.Expires = expires
		return put(tx, bucketLinkUses, key, u, false)
	})
}

// SweepLinkUses removes the counts of links expired before now.
func (s *Store) SweepLinkUses(now time.Time) (int, error) {
	n := 0
	err := s.write(func(tx tx) error {
		n = 0
		var gone []string
		if err := tx.each(bucketLinkUses, "", func(k string, v []byte) error {
			if u, ok := decode[linkUse](v); ok && u.Expires.Before(now) {
				gone = append(gone, k)
			}
			return nil
		}); err != nil {
			return err
		}
		for _, k := range gone {
			if err := tx.del(bucketLinkUses, k); err != nil {
				return err
			}
		}
		n = len(gone)
		return nil
	})
	return n, err
}

// ResealAccess offers each sealed access record (the keys, then every
// policy) to reseal, which changes it in place and reports whether it
// did; name is what the record was sealed for. One transaction.
func (s *Store) ResealAccess(reseal func(name string, sd *Sealed) (bool, error)) (int, error) {
	n := 0
	err := s.write(func(tx tx) error {
		n = 0
		k, err := get[Sealed](tx, bucketAccessKeys, accessKeysKey)
		if err == nil {
			changed, err := reseal(AccessKeysName, &k)
			if err != nil {
				return err
			}
			if changed {
				n++
				if err := put(tx, bucketAccessKeys, accessKeysKey, k, false); err != nil {
					return err
				}
			}
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		ps, err := list[AccessPolicy](tx, bucketAccessPolicies)
		if err != nil {
			return err
		}
		for _, p := range ps {
			changed, err := reseal(PolicySealName(p.ID()), &p.Sealed)
			if err != nil {
				return err
			}
			if changed {
				n++
				if err := put(tx, bucketAccessPolicies, p.ID(), p, false); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return n, err
}

// The names access records are sealed for: the additional data of their
// sealing, so that a record copied under another name does not open.
const AccessKeysName = "tuna.access/keys"

// PolicySealName is what the policy id is sealed for.
func PolicySealName(id string) string { return "tuna.access/policy/" + id }

// CheckAttach says whether owner may put an access policy on an address
// (protocol http: a host; tcp: an endpoint's alias): only the address's
// owner may, not the owners it is shared with. An address nobody holds
// (an unowned reservation, a bare subdomain without a claim) is its
// binder's. The refusal is an *OwnedError naming the owner.
func (s *Store) CheckAttach(protocol, addr, owner string) error {
	return s.be.view(func(tx tx) error {
		var holder string
		if protocol == "tcp" {
			ep, err := get[TCPEndpoint](tx, bucketTCP, addr)
			if err != nil {
				return err
			}
			holder = ep.Owner
		} else if d, err := get[Domain](tx, bucketDomains, addr); err == nil {
			holder = d.Owner
		} else if !errors.Is(err, ErrNotFound) {
			return err
		} else if c, err := get[Claim](tx, bucketClaims, addr); err == nil {
			holder = c.Owner
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		if holder != "" && holder != owner {
			return &OwnedError{Address: addr, Owner: holder}
		}
		return nil
	})
}
