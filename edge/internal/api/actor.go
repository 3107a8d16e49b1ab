package api

import (
	"net/http"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/auth"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
)

// actor is whom a write to a reservation or a tunnel key acts for: the
// calling key, and the owner it names. Creates name the owner in their
// body; changes and releases with ?owner=. The edge checks the owner on
// every write, not only on create and bind:
//
//   - a full key is the edge's administrator and may change or release any
//     reservation, whatever it names;
//   - a key bound to an owner prefix (a cluster id) acts only for owners
//     under it, so it cannot pose as another cluster, and touches only
//     what those owners hold;
//   - any other key changes or releases an owned reservation only for the
//     owner it names, so a client that mixes up addresses (a finalizer
//     that outlived its reservation) is refused instead of releasing
//     someone else's.
type actor struct {
	p *auth.Principal
	// owner is the owner the request names ("" for none).
	owner string
}

// actorOf reads the owner a change or release names in ?owner=.
func actorOf(r *http.Request, p *auth.Principal) (actor, error) {
	a := actor{p: p, owner: r.URL.Query().Get("owner")}
	if a.owner != "" {
		if err := checkOwner("owner", a.owner); err != nil {
			return a, err
		}
	}
	return a, a.mayActFor(a.owner)
}

// admin reports whether the key may override owners: a full key (which
// cannot be bound to a prefix).
func (a actor) admin() bool { return a.p.OwnerPrefix == "" && a.p.Has(apiwire.ScopeFull) }

// mayActFor refuses an owner outside the key's owner prefix; "" (no owner
// named) passes here, and creates refuse it for bound keys (mayCreateFor).
func (a actor) mayActFor(owner string) error {
	if owner == "" || a.p.OwnerPrefix == "" || store.UnderPrefix(owner, a.p.OwnerPrefix) {
		return nil
	}
	return fail(http.StatusForbidden, apiwire.CodeForbidden,
		"API key %s is bound to owner prefix %q: it acts only for owners %q and %q, not for %q",
		a.p.ID, a.p.OwnerPrefix, a.p.OwnerPrefix, a.p.OwnerPrefix+"/...", owner)
}

// mayCreateFor checks the owner a create request names.
func (a actor) mayCreateFor(owner string) error {
	if owner == "" && a.p.OwnerPrefix != "" {
		return fail(http.StatusForbidden, apiwire.CodeForbidden,
			"API key %s is bound to owner prefix %q: name an owner under it (owner \"%s/<namespace>\")",
			a.p.ID, a.p.OwnerPrefix, a.p.OwnerPrefix)
	}
	return a.mayActFor(owner)
}

// mayManage decides whether the actor may change (shared_with) or release
// the reservation address held with ownership o. A refusal for an owned
// address is 403 address_owned, naming its owner.
func (a actor) mayManage(address string, o store.Ownership) error {
	switch {
	case a.admin():
		return nil
	case o.Owner == "" && a.p.OwnerPrefix == "":
		return nil // made by hand without an owner: anyone's, as before owners
	case o.Owner == "":
		return fail(http.StatusForbidden, apiwire.CodeForbidden,
			"%s has no owner, so no cluster holds it: API key %s, bound to owner prefix %q, may not change or release it; use a full key",
			address, a.p.ID, a.p.OwnerPrefix)
	case a.p.OwnerPrefix != "" && !store.UnderPrefix(o.Owner, a.p.OwnerPrefix),
		a.owner != "" && a.owner != o.Owner,
		a.owner == "" && a.p.OwnerPrefix == "":
		return ownedBy(address, o.Owner,
			"only its owner may change or release it (name it with ?owner= if this key acts for it), or the edge's administrator with a full key")
	}
	return nil
}

// mayVerify decides whether the actor may re-run the DNS check of a
// domain: whoever may use it (its owner, the owners it is shared with) or
// manage it. The check changes nothing but the verification result.
func (a actor) mayVerify(address string, o store.Ownership) error {
	if a.owner != "" && o.Allows(a.owner) {
		return nil
	}
	return a.mayManage(address, o)
}

// mayTouchKey hides the tunnel keys of owners outside a bound key's
// prefix: for it they do not exist (404), as in its lists.
func (a actor) mayTouchKey(k store.TunnelKey) error {
	if a.p.OwnerPrefix == "" || store.UnderPrefix(k.Owner, a.p.OwnerPrefix) {
		return nil
	}
	return notFound("tunnel key", k.ID)
}

// ownedBy is the address_owned refusal of address, held by owner.
func ownedBy(address, owner, what string) *apiError {
	ae := fail(http.StatusForbidden, apiwire.CodeAddressOwned, "address %s belongs to owner %s: %s", address, owner, what)
	ae.owner, ae.address = owner, address
	return ae
}
