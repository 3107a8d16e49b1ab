package api

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/auth"
	"code.tuna.am/tuna/k8s-operator/edge/internal/names"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

// Owner limits: an owner is "<cluster-id>/<namespace>" (a UID and a DNS
// label) or "key:<id>", and a namespace is shared with a handful of others.
const (
	maxOwnerLen   = 253
	maxSharedWith = 64
)

func checkOwner(field, o string) error {
	if o == "" || len(o) > maxOwnerLen || strings.ContainsFunc(o, func(r rune) bool { return r > unicode.MaxASCII || !unicode.IsGraphic(r) || r == ' ' }) {
		return fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
			"%s %q: an owner is 1-%d printable ASCII characters without spaces, e.g. \"<cluster-id>/<namespace>\"", field, o, maxOwnerLen)
	}
	return nil
}

// checkSharing validates the owner and shared_with of a create request.
func checkSharing(in apiwire.Sharing) (store.Ownership, error) {
	if in.Owner != "" {
		if err := checkOwner("owner", in.Owner); err != nil {
			return store.Ownership{}, err
		}
	}
	if len(in.SharedWith) > 0 && in.Owner == "" {
		return store.Ownership{}, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
			"shared_with needs an owner: a reservation without one may be used by anyone already")
	}
	shared, err := checkSharedWith(in.SharedWith)
	return store.Ownership{Owner: in.Owner, SharedWith: shared}, err
}

func checkSharedWith(list []string) ([]string, error) {
	if len(list) > maxSharedWith {
		return nil, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest, "shared_with lists at most %d owners", maxSharedWith)
	}
	for _, o := range list {
		if err := checkOwner("shared_with entry", o); err != nil {
			return nil, err
		}
	}
	if len(list) == 0 {
		return nil, nil
	}
	return slices.Compact(slices.Sorted(slices.Values(list))), nil
}

func sharingOut(o store.Ownership) apiwire.Sharing {
	return apiwire.Sharing{Owner: o.Owner, SharedWith: o.SharedWith}
}

// ownedFail turns a store refusal into the API's address_owned answer; ok
// is false when err is no such refusal.
func ownedFail(err error) (ae *apiError, ok bool) {
	var oe *store.OwnedError
	if !errors.As(err, &oe) {
		return nil, false
	}
	if oe.Claim {
		ae = ownedBy(oe.Address, oe.Owner, "its tunnels claimed this bare subdomain first; it is free once that owner's last key for it is revoked, or choose another address")
		ae.claim = true
		return ae, true
	}
	return ownedBy(oe.Address, oe.Owner, "ask that owner to share it with yours (shared_with), or choose another address"), true
}

// decodeSharing reads a TCP endpoint's PATCH body: the new shared_with
// list.
func decodeSharing(r *http.Request) ([]string, error) {
	in, err := decodeDomainPatch(r)
	if err != nil {
		return nil, err
	}
	if in.AccessPolicy != nil {
		return nil, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
			"access_policy applies to domains; a TCP endpoint's access policy is named by the tunnels that bind it")
	}
	if in.SharedWith == nil {
		return nil, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest, "shared_with is required: the full list of owners allowed to use the address ([] for none)")
	}
	return *in.SharedWith, nil
}

// decodeDomainPatch reads a domain's PATCH body: shared_with, an access
// policy, or both, each checked.
func decodeDomainPatch(r *http.Request) (apiwire.UpdateSharing, error) {
	var in apiwire.UpdateSharing
	if err := decode(r, &in); err != nil {
		return in, err
	}
	if in.SharedWith == nil && in.AccessPolicy == nil {
		return in, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
			"give shared_with (the full list of owners allowed to use the address, [] for none), access_policy, or both")
	}
	if in.SharedWith != nil {
		list, err := checkSharedWith(*in.SharedWith)
		if err != nil {
			return in, err
		}
		in.SharedWith = &list
	}
	if p := in.AccessPolicy; p != nil && *p != "" {
		if err := names.CheckDomain(*p + ".x"); err != nil || len(*p) > 253 {
			return in, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest, "access_policy %q is not the name of a policy", *p)
		}
	}
	return in, nil
}

// setShared is the common step of both PATCH handlers.
func setShared(o *store.Ownership, shared []string) error {
	if o.Owner == "" && len(shared) > 0 {
		return fail(http.StatusConflict, apiwire.CodeInvalidRequest,
			"this reservation has no owner, so anyone may use it already; sharing needs an owned reservation")
	}
	o.SharedWith = shared
	return nil
}

func (s *Server) shareDomain(r *http.Request, p *auth.Principal) (int, any, error) {
	a, err := actorOf(r, p)
	if err != nil {
		return 0, nil, err
	}
	in, err := decodeDomainPatch(r)
	if err != nil {
		return 0, nil, err
	}
	name := names.Normalize(r.PathValue("name"))
	d, err := s.st.ChangeDomain(name, func(d *store.Domain) error {
		if err := a.mayManage(name, d.Ownership); err != nil {
			return err
		}
		if p := in.AccessPolicy; p != nil {
			if d.Owner == "" && *p != "" {
				return fail(http.StatusConflict, apiwire.CodeInvalidRequest,
					"this reservation has no owner, so no owner's access policy can guard it; reserve the domain with an owner")
			}
			d.AccessPolicy = *p
		}
		if in.SharedWith == nil {
			return nil
		}
		return setShared(&d.Ownership, *in.SharedWith)
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, notFound("domain", name)
	} else if err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			return 0, nil, err
		}
		return 0, nil, fmt.Errorf("sharing domain %s: %w", name, err)
	}
	if s.reg != nil {
		s.reg.DomainPolicyChanged(d.Name)
	}
	s.EndUnshared(protocol.ProtocolHTTP, []string{d.Name}, d.Ownership)
	return http.StatusOK, s.domainOut(d), nil
}

func (s *Server) shareTCPEndpoint(r *http.Request, p *auth.Principal) (int, any, error) {
	a, err := actorOf(r, p)
	if err != nil {
		return 0, nil, err
	}
	shared, err := decodeSharing(r)
	if err != nil {
		return 0, nil, err
	}
	alias := r.PathValue("alias")
	e, err := s.st.ChangeTCPEndpoint(alias, func(e *store.TCPEndpoint) error {
		if err := a.mayManage(alias, e.Ownership); err != nil {
			return err
		}
		return setShared(&e.Ownership, shared)
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, notFound("TCP endpoint", alias)
	} else if err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			return 0, nil, err
		}
		return 0, nil, fmt.Errorf("sharing TCP endpoint %s: %w", alias, err)
	}
	s.EndUnshared(protocol.ProtocolTCP, []string{e.Alias, strconv.Itoa(e.Port)}, e.Ownership)
	return http.StatusOK, s.tcpOut(e), nil
}

// EndUnshared ends the live sessions of tunnel keys for addrs whose owner
// may no longer use them, so taking a namespace off shared_with takes
// effect at once rather than at its next reconnect. The edge also calls it
// when another node of a cluster changed the sharing.
func (s *Server) EndUnshared(proto string, addrs []string, o store.Ownership) {
	recs, err := s.st.ListTunnelKeys()
	if err != nil {
		s.log.Error("listing tunnel keys after a sharing change", "err", err)
		return
	}
	for _, k := range recs {
		if k.Protocol == proto && slices.Contains(addrs, k.Address) && !o.Allows(k.Owner) {
			s.reg.TerminateKey(k.ID, protocol.CodeAddressOwned,
				fmt.Sprintf("address %s is no longer shared with owner %s by its owner %s", k.Address, k.Owner, o.Owner))
		}
	}
}
