package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	edgeaccess "code.tuna.am/tuna/k8s-operator/edge/internal/access"
	"code.tuna.am/tuna/k8s-operator/edge/internal/auth"
	"code.tuna.am/tuna/k8s-operator/edge/internal/names"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
)

// The access policies are owned like reservations (actor.go): a write
// names its owner with ?owner=, which a key bound to an owner prefix may
// only name under its prefix; lists show such a key only its owners'.

func (s *Server) accessRoutes() {
	s.handle("PUT /v1/access-policies/{name}", writeAccess, s.putAccessPolicy)
	s.handle("GET /v1/access-policies", writeAccess, s.listAccessPolicies)
	s.handle("GET /v1/access-policies/{name}", writeAccess, s.getAccessPolicy)
	s.handle("DELETE /v1/access-policies/{name}", writeAccess, s.deleteAccessPolicy)
	s.handle("GET /v1/access/keys", fullAccess, s.accessKeys)
	s.handle("POST /v1/access/keys/rotate", fullAccess, s.rotateAccessKeys)
	s.handleW("GET /v1/access/jwks", public, s.accessJWKS)
}

// policyActor reads the owner a policy call acts for: required.
func policyActor(r *http.Request, p *auth.Principal) (actor, string, error) {
	a, err := actorOf(r, p)
	if err != nil {
		return a, "", err
	}
	if a.owner == "" {
		return a, "", fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
			"name the policy's owner with ?owner= (\"<cluster-id>/<namespace>\" from the operator)")
	}
	name := r.PathValue("name")
	if err := names.CheckDomain(name + ".x"); err != nil || len(name) > 253 {
		return a, "", fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
			"%q is not a policy name: lowercase letters, digits, '-' and '.', as a Kubernetes name", name)
	}
	return a, name, a.mayCreateFor(a.owner)
}

func (s *Server) putAccessPolicy(r *http.Request, p *auth.Principal) (int, any, error) {
	a, name, err := policyActor(r, p)
	if err != nil {
		return 0, nil, err
	}
	var in apiwire.AccessPolicy
	if err := decode(r, &in); err != nil {
		return 0, nil, err
	}
	if (in.Name != "" && in.Name != name) || (in.Owner != "" && in.Owner != a.owner) {
		return 0, nil, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
			"the body names policy %q of owner %q, the path %q of owner %q: they must agree", in.Name, in.Owner, name, a.owner)
	}
	in.Name, in.Owner = name, a.owner
	out, changed, err := s.cfg.Access.Put(in, func(*store.AccessPolicy) error { return nil })
	var ie *edgeaccess.InvalidError
	if errors.As(err, &ie) {
		return 0, nil, fail(http.StatusBadRequest, apiwire.CodeInvalidAccessPolicy, "access policy %s: %s", name, ie.Msg)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("storing access policy %s/%s: %w", a.owner, name, err)
	}
	if changed {
		s.log.Info("access policy written", "owner", a.owner, "policy", name, "digest", out.Digest)
	}
	return http.StatusOK, out, nil
}

func (s *Server) getAccessPolicy(r *http.Request, p *auth.Principal) (int, any, error) {
	a, name, err := policyActor(r, p)
	if err != nil {
		return 0, nil, err
	}
	out, _, err := s.cfg.Access.Get(a.owner, name)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, notFound("access policy", a.owner+"/"+name)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("reading access policy: %w", err)
	}
	return http.StatusOK, out, nil
}

func (s *Server) listAccessPolicies(r *http.Request, p *auth.Principal) (int, any, error) {
	a, err := actorOf(r, p)
	if err != nil {
		return 0, nil, err
	}
	items, err := s.cfg.Access.List(func(owner string) bool {
		return (a.owner == "" || owner == a.owner) && (p.OwnerPrefix == "" || store.UnderPrefix(owner, p.OwnerPrefix))
	})
	if err != nil {
		return 0, nil, fmt.Errorf("listing access policies: %w", err)
	}
	return http.StatusOK, apiwire.List[apiwire.AccessPolicy]{Items: items}, nil
}

func (s *Server) deleteAccessPolicy(r *http.Request, p *auth.Principal) (int, any, error) {
	a, name, err := policyActor(r, p)
	if err != nil {
		return 0, nil, err
	}
	err = s.cfg.Access.Delete(a.owner, name)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, notFound("access policy", a.owner+"/"+name)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("deleting access policy: %w", err)
	}
	s.log.Info("access policy deleted", "owner", a.owner, "policy", name)
	return http.StatusNoContent, nil, nil
}

func (s *Server) accessKeys(*http.Request, *auth.Principal) (int, any, error) {
	return http.StatusOK, s.accessKeysOut(), nil
}

func (s *Server) accessKeysOut() apiwire.AccessKeys {
	sessions, assertions := s.cfg.Access.Engine().KeyIDs()
	return apiwire.AccessKeys{SessionKeys: sessions, AssertionKeys: assertions}
}

func (s *Server) rotateAccessKeys(*http.Request, *auth.Principal) (int, any, error) {
	if err := s.cfg.Access.RotateKeys(); err != nil {
		return 0, nil, fmt.Errorf("rotating the access keys: %w", err)
	}
	out := s.accessKeysOut()
	s.log.Info("access keys rotated", "session_key", out.SessionKeys[0], "assertion_key", out.AssertionKeys[0])
	return http.StatusOK, out, nil
}

// accessJWKS publishes the keys that verify identity assertions: public,
// like every protected host's /.tuna/jwks.json.
func (s *Server) accessJWKS(w http.ResponseWriter, _ *http.Request, _ *auth.Principal) (int, any, error) {
	w.Header().Set("Cache-Control", "public, max-age=300")
	return http.StatusOK, json.RawMessage(s.cfg.Access.Engine().JWKS()), nil
}
