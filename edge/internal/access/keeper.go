package access

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/secrets"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
)

// Keeper keeps the policies and the keys in the edge's store, sealed by
// the secrets keyring, and the engine in step with them: the API writes
// through it, and a cluster node's follower calls Reload for the changes
// other nodes made.
type Keeper struct {
	st   *store.Store
	ring *secrets.Keyring
	e    *Engine
	now  func() time.Time
}

// Open loads (or, on a new edge, makes) the access keys and every policy
// into e. It reseals the records that an older secrets key sealed, as
// secrets.Open does for the secrets: rotating the secrets keyring is one
// step for both.
func Open(st *store.Store, ring *secrets.Keyring, e *Engine) (*Keeper, int, error) {
	k := &Keeper{st: st, ring: ring, e: e, now: e.cfg.Now}
	if e.cfg.Uses == nil {
		e.cfg.Uses = k
	}
	n, err := st.ResealAccess(ring.Reseal)
	if err != nil {
		return nil, 0, fmt.Errorf("access: re-encrypting with the secrets key %s: %w", ring.Primary(), err)
	}
	if err := k.ReloadKeys(); err != nil {
		return nil, 0, err
	}
	if err := k.ReloadAll(); err != nil {
		return nil, 0, err
	}
	return k, n, nil
}

// Engine is the engine the keeper keeps.
func (k *Keeper) Engine() *Engine { return k.e }

func (k *Keeper) seal(name string, v any) (store.Sealed, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return store.Sealed{}, err
	}
	id, nonce, ct, err := k.ring.Seal(name, plain)
	return store.Sealed{KeyID: id, Nonce: nonce, Data: ct}, err
}

func (k *Keeper) open(name string, sd store.Sealed, v any) error {
	plain, err := k.ring.Open(name, sd.KeyID, sd.Nonce, sd.Data)
	if err != nil {
		return err
	}
	return json.Unmarshal(plain, v)
}

// ReloadKeys reads the keys (making them on a new edge) into the engine.
func (k *Keeper) ReloadKeys() error {
	sd, err := k.st.AccessKeys(func() (store.Sealed, error) {
		keys, err := NewKeys(k.now())
		if err != nil {
			return store.Sealed{}, err
		}
		return k.seal(store.AccessKeysName, keys)
	})
	if err != nil {
		return fmt.Errorf("access: reading the access keys: %w", err)
	}
	var keys Keys
	if err := k.open(store.AccessKeysName, sd, &keys); err != nil {
		return fmt.Errorf("access: opening the access keys: %w", err)
	}
	return k.e.SetKeys(keys)
}

// RotateKeys makes a new session key and a new assertion key the ones in
// use, keeping the previous ones to open and verify (KeepKeys).
func (k *Keeper) RotateKeys() error {
	_, err := k.st.ChangeAccessKeys(func(sd store.Sealed) (store.Sealed, error) {
		var cur Keys
		if err := k.open(store.AccessKeysName, sd, &cur); err != nil {
			return sd, err
		}
		next, err := cur.Rotate(k.now())
		if err != nil {
			return sd, err
		}
		return k.seal(store.AccessKeysName, next)
	})
	if err != nil {
		return err
	}
	return k.ReloadKeys()
}

// ReloadAll compiles every stored policy into the engine. A policy that no
// longer compiles (stored by an older edge) is left out, and the addresses
// it guards refuse every request, as for a missing one.
func (k *Keeper) ReloadAll() error {
	recs, err := k.st.ListAccessPolicies()
	if err != nil {
		return fmt.Errorf("access: listing policies: %w", err)
	}
	var ps []*Policy
	for _, r := range recs {
		p, err := k.compile(r)
		if err != nil {
			k.e.log.Error("an access policy in the store does not load: the addresses it guards refuse every request", "policy", r.ID(), "err", err)
			continue
		}
		ps = append(ps, p)
	}
	k.e.Replace(ps)
	return nil
}

// Reload reads one policy by id into the engine, or drops it when gone.
func (k *Keeper) Reload(id string) {
	owner, name := store.SplitPolicyID(id)
	r, err := k.st.GetAccessPolicy(owner, name)
	if errors.Is(err, store.ErrNotFound) {
		k.e.Remove(id)
		return
	}
	if err != nil {
		k.e.log.Warn("reading a changed access policy failed; it stays as it was", "policy", id, "err", err)
		return
	}
	p, err := k.compile(r)
	if err != nil {
		k.e.log.Error("a changed access policy does not load: the addresses it guards refuse every request", "policy", id, "err", err)
		k.e.Remove(id)
		return
	}
	k.e.Put(p)
}

func (k *Keeper) compile(r store.AccessPolicy) (*Policy, error) {
	var in apiwire.AccessPolicy
	if err := k.open(store.PolicySealName(r.ID()), r.Sealed, &in); err != nil {
		return nil, err
	}
	return Compile(in, k.e)
}

// Put checks, stores and installs a policy; may decides, given the stored
// one (nil: none), whether the caller may write it. It returns the policy
// as stored (secrets left out) and whether it changed.
func (k *Keeper) Put(in apiwire.AccessPolicy, may func(old *store.AccessPolicy) error) (apiwire.AccessPolicy, bool, error) {
	in.Digest, in.UpdatedAt = "", time.Time{}
	p, err := Compile(in, k.e)
	if err != nil {
		return apiwire.AccessPolicy{}, false, err
	}
	rec := store.AccessPolicy{Owner: in.Owner, Name: in.Name, Digest: p.Digest, UpdatedAt: k.now().UTC()}
	if rec.Sealed, err = k.seal(store.PolicySealName(rec.ID()), in); err != nil {
		return apiwire.AccessPolicy{}, false, err
	}
	changed, err := k.st.PutAccessPolicy(rec, may)
	if err != nil {
		return apiwire.AccessPolicy{}, false, err
	}
	if changed {
		k.e.Put(p)
	}
	out, _, err := k.Get(in.Owner, in.Name)
	return out, changed, err
}

// Get returns a stored policy without its secrets.
func (k *Keeper) Get(owner, name string) (apiwire.AccessPolicy, bool, error) {
	r, err := k.st.GetAccessPolicy(owner, name)
	if err != nil {
		return apiwire.AccessPolicy{}, false, err
	}
	out, err := k.decode(r)
	return out, true, err
}

func (k *Keeper) decode(r store.AccessPolicy) (apiwire.AccessPolicy, error) {
	var in apiwire.AccessPolicy
	if err := k.open(store.PolicySealName(r.ID()), r.Sealed, &in); err != nil {
		return apiwire.AccessPolicy{}, err
	}
	out := Redacted(in)
	out.Digest, out.UpdatedAt = r.Digest, r.UpdatedAt
	return out, nil
}

// List returns the stored policies that keep says to, without secrets.
func (k *Keeper) List(keep func(owner string) bool) ([]apiwire.AccessPolicy, error) {
	recs, err := k.st.ListAccessPolicies()
	if err != nil {
		return nil, err
	}
	out := []apiwire.AccessPolicy{}
	for _, r := range recs {
		if !keep(r.Owner) {
			continue
		}
		p, err := k.decode(r)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Delete removes a policy.
func (k *Keeper) Delete(owner, name string) error {
	if err := k.st.DeleteAccessPolicy(owner, name); err != nil {
		return err
	}
	k.e.Remove(owner + "/" + name)
	return nil
}

// UseLink counts a link's use in the store (LinkUses).
func (k *Keeper) UseLink(policy, id string, max int, expires time.Time) error {
	err := k.st.UseLink(policy, id, max, expires)
	if errors.Is(err, store.ErrUsedUp) {
		return ErrUsedUp
	}
	return err
}
