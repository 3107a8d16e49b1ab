package api

import (
	"errors"
	"fmt"
	"net/http"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/auth"
	"code.tuna.am/tuna/k8s-operator/edge/internal/dnsverify"
	"code.tuna.am/tuna/k8s-operator/edge/internal/keyhash"
	"code.tuna.am/tuna/k8s-operator/edge/internal/names"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

func (s *Server) domainOut(d store.Domain) apiwire.Domain {
	out := apiwire.Domain{
		Name: d.Name, Subdomain: d.Subdomain, Custom: d.Custom, Verified: d.Verified,
		VerifyError: d.VerifyError, Sharing: sharingOut(d.Ownership), CreatedAt: d.CreatedAt, AccessPolicy: d.AccessPolicy,
	}
	if d.Custom {
		out.DNSRecords = []apiwire.DNSRecord{
			{Type: "CNAME", Name: d.Name, Value: s.cfg.CNAMETarget},
			{Type: "TXT", Name: dnsverify.ChallengePrefix + d.Name, Value: d.Token},
		}
	}
	return out
}

// newDomain validates a create request and returns the record to store.
func (s *Server) newDomain(in apiwire.CreateDomain) (store.Domain, error) {
	base := s.cfg.BaseDomain
	now := s.cfg.Now()
	switch {
	case (in.Subdomain == "") == (in.Domain == ""):
		return store.Domain{}, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest, "give exactly one of subdomain or domain")
	case in.Subdomain != "":
		if err := names.CheckLabel(in.Subdomain); err != nil {
			return store.Domain{}, fail(http.StatusBadRequest, apiwire.CodeInvalidDomain, "subdomain: %v", err)
		}
		return store.Domain{Name: in.Subdomain + "." + base, Subdomain: in.Subdomain, Verified: true, CreatedAt: now}, nil
	}
	name := names.Normalize(in.Domain)
	if err := names.CheckDomain(name); err != nil {
		return store.Domain{}, fail(http.StatusBadRequest, apiwire.CodeInvalidDomain, "domain: %v", err)
	}
	// A name under the base domain needs no DNS proof: it is a subdomain.
	if l, ok := names.SubdomainOf(name, base); ok {
		return store.Domain{Name: name, Subdomain: l, Verified: true, CreatedAt: now}, nil
	}
	if name == base || len(name) > len(base) && name[len(name)-len(base)-1:] == "."+base {
		return store.Domain{}, fail(http.StatusBadRequest, apiwire.CodeInvalidDomain,
			"domain %s is the edge's base domain or nested under it: reserve a single-label subdomain instead", name)
	}
	return store.Domain{Name: name, Custom: true, Token: keyhash.RandomToken(16), CreatedAt: now}, nil
}

func (s *Server) createDomain(r *http.Request, p *auth.Principal) (int, any, error) {
	var in apiwire.CreateDomain
	if err := decode(r, &in); err != nil {
		return 0, nil, err
	}
	if err := (actor{p: p}).mayCreateFor(in.Owner); err != nil {
		return 0, nil, err
	}
	d, err := s.newDomain(in)
	if err != nil {
		return 0, nil, err
	}
	if d.Ownership, err = checkSharing(in.Sharing); err != nil {
		return 0, nil, err
	}
	if d.Custom {
		// Check at once: the records may already be in place (re-created
		// reservation), which saves the user a verify call.
		s.check(r, &d)
	}
	if err := s.st.CreateDomain(d); errors.Is(err, store.ErrExists) {
		return 0, nil, fail(http.StatusConflict, apiwire.CodeNameTaken, "domain %s is already reserved", d.Name)
	} else if oerr, owned := ownedFail(err); owned {
		return 0, nil, oerr
	} else if err != nil {
		return 0, nil, fmt.Errorf("storing domain: %w", err)
	}
	return http.StatusCreated, s.domainOut(d), nil
}

// check runs the DNS verification and records the outcome on d.
func (s *Server) check(r *http.Request, d *store.Domain) {
	err := s.cfg.Verifier.Check(r.Context(), d.Name, s.cfg.CNAMETarget, d.Token)
	d.Verified = err == nil
	d.VerifyError = ""
	if err != nil {
		d.VerifyError = err.Error()
	}
}

func (s *Server) listDomains(*http.Request, *auth.Principal) (int, any, error) {
	recs, err := s.st.ListDomains()
	if err != nil {
		return 0, nil, fmt.Errorf("listing domains: %w", err)
	}
	out := apiwire.List[apiwire.Domain]{Items: make([]apiwire.Domain, 0, len(recs))}
	for _, d := range recs {
		out.Items = append(out.Items, s.domainOut(d))
	}
	return http.StatusOK, out, nil
}

func (s *Server) lookupDomain(r *http.Request) (store.Domain, error) {
	name := names.Normalize(r.PathValue("name"))
	d, err := s.st.GetDomain(name)
	if errors.Is(err, store.ErrNotFound) {
		return d, notFound("domain", name)
	} else if err != nil {
		return d, fmt.Errorf("reading domain: %w", err)
	}
	return d, nil
}

func (s *Server) getDomain(r *http.Request, _ *auth.Principal) (int, any, error) {
	d, err := s.lookupDomain(r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, s.domainOut(d), nil
}

func (s *Server) verifyDomain(r *http.Request, p *auth.Principal) (int, any, error) {
	a, err := actorOf(r, p)
	if err != nil {
		return 0, nil, err
	}
	d, err := s.lookupDomain(r)
	if err != nil {
		return 0, nil, err
	}
	if err := a.mayVerify(d.Name, d.Ownership); err != nil {
		return 0, nil, err
	}
	if d.Custom {
		s.check(r, &d)
		// Only the verification fields change: a PATCH of shared_with during
		// the DNS lookups must not be undone.
		d, err = s.st.ChangeDomain(d.Name, func(cur *store.Domain) error {
			cur.Verified, cur.VerifyError = d.Verified, d.VerifyError
			return nil
		})
		if err != nil {
			return 0, nil, fmt.Errorf("saving verification of %s: %w", d.Name, err)
		}
	}
	return http.StatusOK, s.domainOut(d), nil
}

func (s *Server) deleteDomain(r *http.Request, p *auth.Principal) (int, any, error) {
	a, err := actorOf(r, p)
	if err != nil {
		return 0, nil, err
	}
	name := names.Normalize(r.PathValue("name"))
	err = s.st.DeleteDomain(name, func(o store.Ownership) error { return a.mayManage(name, o) })
	var ae *apiError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return 0, nil, notFound("domain", name)
	case errors.As(err, &ae):
		return 0, nil, ae
	case err != nil:
		return 0, nil, fmt.Errorf("deleting domain: %w", err)
	}
	// The reservation is gone: nobody keeps serving it on its strength. A
	// tunnel key for a subdomain may bind it again as a bare subdomain,
	// under the claim rules; a custom domain is no longer served at all.
	s.reg.TerminateHost(name, protocol.CodeAddressNotFound, fmt.Sprintf("domain %s was deleted", name))
	return http.StatusNoContent, nil, nil
}
