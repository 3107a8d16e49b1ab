package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/auth"
	"code.tuna.am/tuna/k8s-operator/edge/internal/keyhash"
	"code.tuna.am/tuna/k8s-operator/edge/internal/names"
	"code.tuna.am/tuna/k8s-operator/edge/internal/secrets"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
	"code.tuna.am/tuna/k8s-operator/edge/keys"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

// Label limits keep a tunnel key record small; the operator uses a few
// labels (cluster id, resource UID, kind, namespace/name).
const (
	maxLabels       = 32
	maxLabelKeyLen  = 253
	maxLabelValLen  = 253
	maxAPIKeyName   = 200
	revokedReasonFm = "tunnel key %s was revoked"
)

func (s *Server) getEdge(*http.Request, *auth.Principal) (int, any, error) {
	info := s.cfg.EdgeInfo()
	info.APIRateLimit = s.lim.budget()
	return http.StatusOK, info, nil
}

func (s *Server) listNodes(*http.Request, *auth.Principal) (int, any, error) {
	nodes, err := s.cfg.Nodes()
	if err != nil {
		return 0, nil, fmt.Errorf("listing nodes: %w", err)
	}
	return http.StatusOK, apiwire.List[apiwire.Node]{Items: nodes}, nil
}

func (s *Server) whoAmI(_ *http.Request, p *auth.Principal) (int, any, error) {
	return http.StatusOK, apiwire.WhoAmI{KeyID: p.ID, Name: p.Name, Scopes: p.Scopes, SecretPrefix: p.SecretPrefix,
		OwnerPrefix: p.OwnerPrefix}, nil
}

// CreateAPIKey makes an API key and returns its secret; the API handler and
// the edge's bootstrap share it. rec supplies the record's other fields
// (creation time, secret prefix, owner prefix).
func CreateAPIKey(st *store.Store, name string, scopes []string, rec func() store.APIKey) (apiwire.APIKey, error) {
	if len(scopes) == 0 {
		return apiwire.APIKey{}, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
			"scopes is required: one or more of %s", apiwire.ScopeList())
	}
	for _, sc := range scopes {
		if !apiwire.ValidScope(sc) {
			return apiwire.APIKey{}, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
				"unknown scope %q: use %s", sc, apiwire.ScopeList())
		}
	}
	if len(name) > maxAPIKeyName {
		return apiwire.APIKey{}, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest, "name is longer than %d characters", maxAPIKeyName)
	}
	r := rec()
	if r.SecretPrefix != "" {
		if err := secrets.CheckPrefix(r.SecretPrefix); err != nil {
			return apiwire.APIKey{}, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest, "secret_prefix: %v", err)
		}
	}
	if err := checkOwnerPrefix(r.OwnerPrefix, scopes); err != nil {
		return apiwire.APIKey{}, err
	}
	k, err := keyhash.New(keys.KindAPI)
	if err != nil {
		return apiwire.APIKey{}, err
	}
	r.ID, r.Name, r.Scopes, r.Hash = k.ID, name, slices.Compact(slices.Sorted(slices.Values(scopes))), keyhash.Of(k)
	if err := st.CreateAPIKey(r); err != nil {
		return apiwire.APIKey{}, fmt.Errorf("storing API key: %w", err)
	}
	out := apiKeyOut(r)
	out.Key = k.String()
	return out, nil
}

// checkOwnerPrefix validates the owner prefix of a new API key: a
// tunnels:write key bound to a cluster id. A full key manages the whole
// edge (API keys included), so binding one would bind nothing.
func checkOwnerPrefix(prefix string, scopes []string) error {
	switch {
	case prefix == "":
		return nil
	case slices.Contains(scopes, apiwire.ScopeFull):
		return fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
			"owner_prefix binds a tunnels:write key; a full key manages the whole edge and cannot be bound: give scopes [%q]", apiwire.ScopeWrite)
	case !slices.Contains(scopes, apiwire.ScopeWrite):
		return fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
			"owner_prefix binds what a key reserves and issues, which needs scope %q", apiwire.ScopeWrite)
	case strings.HasSuffix(prefix, "/"):
		return fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
			"owner_prefix %q: give the cluster id without the trailing /; the key then acts for owners %q and %q",
			prefix, strings.TrimSuffix(prefix, "/"), prefix+"...")
	}
	return checkOwner("owner_prefix", prefix)
}

func apiKeyOut(r store.APIKey) apiwire.APIKey {
	return apiwire.APIKey{ID: r.ID, Name: r.Name, Scopes: r.Scopes, SecretPrefix: r.SecretPrefix, OwnerPrefix: r.OwnerPrefix,
		CreatedAt: r.CreatedAt}
}

func (s *Server) createAPIKey(r *http.Request, _ *auth.Principal) (int, any, error) {
	var in apiwire.CreateAPIKey
	if err := decode(r, &in); err != nil {
		return 0, nil, err
	}
	out, err := CreateAPIKey(s.st, in.Name, in.Scopes, func() store.APIKey {
		return store.APIKey{CreatedAt: s.cfg.Now(), SecretPrefix: in.SecretPrefix, OwnerPrefix: in.OwnerPrefix}
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, out, nil
}

func (s *Server) listAPIKeys(*http.Request, *auth.Principal) (int, any, error) {
	recs, err := s.st.ListAPIKeys()
	if err != nil {
		return 0, nil, fmt.Errorf("listing API keys: %w", err)
	}
	out := apiwire.List[apiwire.APIKey]{Items: make([]apiwire.APIKey, 0, len(recs))}
	for _, r := range recs {
		out.Items = append(out.Items, apiKeyOut(r))
	}
	return http.StatusOK, out, nil
}

func (s *Server) deleteAPIKey(r *http.Request, _ *auth.Principal) (int, any, error) {
	id := r.PathValue("id")
	if err := s.st.DeleteAPIKey(id); errors.Is(err, store.ErrNotFound) {
		return 0, nil, notFound("API key", id)
	} else if err != nil {
		return 0, nil, fmt.Errorf("deleting API key: %w", err)
	}
	s.lim.forget(id)
	// A tunnels:connect key may carry live tunnels: revoking it ends them.
	s.reg.TerminateKey(id, protocol.CodeKeyRevoked, fmt.Sprintf("API key %s was revoked", id))
	return http.StatusNoContent, nil, nil
}

// tunnelAddress validates and normalises the address a tunnel key is
// limited to.
func (s *Server) tunnelAddress(proto, addr string) (string, error) {
	if addr == "" {
		return "", nil
	}
	if proto == protocol.ProtocolTCP {
		if port, err := strconv.Atoi(addr); err == nil {
			if port < s.cfg.TCPPortFirst || port > s.cfg.TCPPortLast {
				return "", fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
					"port %d is outside the edge's TCP range %d-%d", port, s.cfg.TCPPortFirst, s.cfg.TCPPortLast)
			}
			return addr, nil
		}
		if err := names.CheckAlias(addr); err != nil {
			return "", fail(http.StatusBadRequest, apiwire.CodeInvalidRequest, "address: %v", err)
		}
		return addr, nil
	}
	if ip, err := netip.ParseAddr(addr); err == nil {
		if !slices.Contains(s.cfg.GatewayAddresses, ip) {
			return "", fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
				"address %s is not one of the edge's Gateway addresses (tuna-edge serve --gateway-addresses; GET /v1/edge lists them)", addr)
		}
		return ip.String(), nil
	}
	if !strings.Contains(addr, ".") {
		if err := names.CheckLabel(addr); err != nil {
			return "", fail(http.StatusBadRequest, apiwire.CodeInvalidDomain, "address: %v", err)
		}
		return addr + "." + s.cfg.BaseDomain, nil
	}
	host := names.Normalize(addr)
	if err := names.CheckHost(host); err != nil {
		return "", fail(http.StatusBadRequest, apiwire.CodeInvalidDomain, "address: %v", err)
	}
	if parent, ok := names.WildcardParent(host); ok {
		if !s.Claimable(host) {
			return "", fail(http.StatusBadRequest, apiwire.CodeInvalidDomain,
				"address %s: a wildcard covers the names under a subdomain of %s (*.<name>.%s), under a verified custom domain, or any names on an edge that takes any host (tuna-edge serve --any-host), never %s itself; %s is none of these",
				host, s.cfg.BaseDomain, s.cfg.BaseDomain, s.cfg.BaseDomain, parent)
		}
		return host, nil
	}
	if _, ok := names.SubdomainOf(host, s.cfg.BaseDomain); ok {
		return host, nil
	}
	d, err := s.st.GetDomain(host)
	if s.cfg.AnyHost && (err != nil || !d.Custom) {
		return host, nil // claimable: see claimable
	}
	if err != nil || !d.Custom {
		return "", fail(http.StatusBadRequest, apiwire.CodeInvalidDomain,
			"address %s is neither a subdomain of %s nor a reserved custom domain: reserve it with POST /v1/domains first",
			host, s.cfg.BaseDomain)
	}
	return host, nil
}

// claimable reports whether the first owner of a key for HTTP address addr
// claims it: a bare subdomain of the base domain, a Gateway address, on an
// --any-host edge every host, and a wildcard (wildcardClaimable). A reserved custom domain carries its
// owner in its reservation instead (the store takes that first), and TCP
// addresses exist only as reservations.
func (s *Server) claimable(addr string) bool { return s.Claimable(addr) }

// Claimable is claimable for the transport: a key for such an address
// binds it without a reservation, its owner having claimed it when the
// key was issued.
func (s *Server) Claimable(addr string) bool {
	if parent, ok := names.WildcardParent(addr); ok {
		return s.wildcardClaimable(parent)
	}
	if _, ok := names.SubdomainOf(addr, s.cfg.BaseDomain); ok {
		return true
	}
	if ip, err := netip.ParseAddr(addr); err == nil {
		return slices.Contains(s.cfg.GatewayAddresses, ip)
	}
	return s.cfg.AnyHost
}

// wildcardClaimable reports whether "*.parent" may be claimed: parent is a
// bare subdomain of the base domain, a verified custom domain, or, on an
// --any-host edge, any name. Never a wildcard over the base domain itself
// (or a name above it): the names under the base domain nobody holds,
// such as a quick tunnel's once it is gone, must not fall to one owner.
// The owner of parent, when it has one, is checked by the store
// (store.IssueTunnelKey), as for any address.
func (s *Server) wildcardClaimable(parent string) bool {
	base := s.cfg.BaseDomain
	if parent == base || strings.HasSuffix(base, "."+parent) {
		return false
	}
	if _, ok := names.SubdomainOf(parent, base); ok || s.cfg.AnyHost {
		return true
	}
	d, err := s.st.GetDomain(parent)
	return err == nil && d.Custom && d.Verified
}

func checkLabels(labels map[string]string) error {
	if len(labels) > maxLabels {
		return fail(http.StatusBadRequest, apiwire.CodeInvalidRequest, "at most %d labels", maxLabels)
	}
	for k, v := range labels {
		if k == "" || len(k) > maxLabelKeyLen || len(v) > maxLabelValLen || strings.Contains(k, "=") {
			return fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
				"label %q: keys must be 1-%d characters without '=', values at most %d", k, maxLabelKeyLen, maxLabelValLen)
		}
	}
	return nil
}

func (s *Server) tunnelKeyOut(r store.TunnelKey) apiwire.TunnelKey {
	out := apiwire.TunnelKey{ID: r.ID, Protocol: r.Protocol, Address: r.Address, Labels: r.Labels, Owner: r.Owner, CreatedAt: r.CreatedAt}
	if !r.ExpiresAt.IsZero() {
		at := r.ExpiresAt
		out.ExpiresAt, out.TTLSeconds = &at, int64(r.TTL/time.Second)
	}
	out.MaxSessions = r.MaxSessions
	if out.MaxSessions == 0 {
		out.MaxSessions = s.cfg.DefaultPoolSize
	}
	for _, in := range s.reg.ByKey(r.ID) {
		out.Sessions = append(out.Sessions, apiwire.Session{ID: in.ID, URL: in.URL, RemoteAddr: in.RemoteAddr, ConnectedAt: in.ConnectedAt, Draining: in.Draining})
	}
	if len(out.Sessions) > 0 {
		out.Session = &out.Sessions[0]
	}
	return out
}

func (s *Server) createTunnelKey(r *http.Request, p *auth.Principal) (int, any, error) {
	var in apiwire.CreateTunnelKey
	if err := decode(r, &in); err != nil {
		return 0, nil, err
	}
	is, secret, err := s.newTunnelKey(p, in)
	if err != nil {
		return 0, nil, err
	}
	if err := s.st.IssueTunnelKey(is.Key, is.Claimable); err != nil {
		return 0, nil, issueFailed(err)
	}
	out := s.tunnelKeyOut(is.Key)
	out.Key = secret
	return http.StatusCreated, out, nil
}

// newTunnelKey checks a request for a tunnel key and makes the key: its
// record, whether it may claim its address, and its secret.
func (s *Server) newTunnelKey(p *auth.Principal, in apiwire.CreateTunnelKey) (store.Issue, string, error) {
	if err := (actor{p: p}).mayCreateFor(in.Owner); err != nil {
		return store.Issue{}, "", err
	}
	if in.Protocol != protocol.ProtocolHTTP && in.Protocol != protocol.ProtocolTCP {
		return store.Issue{}, "", fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
			"protocol is required: %q or %q", protocol.ProtocolHTTP, protocol.ProtocolTCP)
	}
	addr, err := s.tunnelAddress(in.Protocol, in.Address)
	if err != nil {
		return store.Issue{}, "", err
	}
	if err := checkLabels(in.Labels); err != nil {
		return store.Issue{}, "", err
	}
	if in.Owner != "" {
		if err := checkOwner("owner", in.Owner); err != nil {
			return store.Issue{}, "", err
		}
	}
	if in.MaxSessions < 0 || in.MaxSessions > MaxPoolSize {
		return store.Issue{}, "", fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
			"max_sessions must be 0 (the edge's default) to %d, got %d", MaxPoolSize, in.MaxSessions)
	}
	k, err := keyhash.New(keys.KindTunnel)
	if err != nil {
		return store.Issue{}, "", err
	}
	now := s.cfg.Now()
	rec := store.TunnelKey{
		ID: k.ID, Protocol: in.Protocol, Address: addr, Labels: in.Labels, Owner: in.Owner,
		Hash: keyhash.Of(k), CreatedAt: now, MaxSessions: in.MaxSessions,
	}
	if ttl := s.cfg.TunnelKeyTTL; ttl > 0 {
		rec.ExpiresAt, rec.TTL = now.Add(ttl), ttl
	}
	claimable := in.Protocol == protocol.ProtocolHTTP && s.claimable(addr)
	return store.Issue{Key: rec, Claimable: claimable}, k.String(), nil
}

// issueFailed is the answer to a store's refusal to issue a key.
func issueFailed(err error) error {
	if oerr, owned := ownedFail(err); owned {
		return oerr
	}
	return fmt.Errorf("storing tunnel key: %w", err)
}

// renewal gives a live key a full TTL from now (see renewTunnelKey).
func (s *Server) renewal(a actor) func(k *store.TunnelKey) error {
	ttl, now := s.cfg.TunnelKeyTTL, s.cfg.Now()
	return func(k *store.TunnelKey) error {
		if err := a.mayTouchKey(*k); err != nil {
			return err
		}
		if k.Expired(now) {
			return fail(http.StatusConflict, apiwire.CodeKeyExpired,
				"tunnel key %s expired at %s: an expired key cannot be renewed; issue a new one", k.ID, k.ExpiresAt.UTC().Format(time.RFC3339))
		}
		if ttl > 0 {
			k.ExpiresAt, k.TTL = now.Add(ttl), ttl
		}
		return nil
	}
}

func matches(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// lookupTunnelKey reads the key of the path, as p may see it.
func (s *Server) lookupTunnelKey(r *http.Request, p *auth.Principal) (store.TunnelKey, error) {
	id := r.PathValue("id")
	rec, err := s.st.GetTunnelKey(id)
	if errors.Is(err, store.ErrNotFound) {
		return rec, notFound("tunnel key", id)
	} else if err != nil {
		return rec, fmt.Errorf("reading tunnel key: %w", err)
	}
	return rec, actor{p: p}.mayTouchKey(rec)
}

func (s *Server) getTunnelKey(r *http.Request, p *auth.Principal) (int, any, error) {
	rec, err := s.lookupTunnelKey(r, p)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, s.tunnelKeyOut(rec), nil
}

// deleteTunnelKey revokes the key and ends its live session before
// answering, so the caller knows the tunnel is down when the call returns.
// A key's owner never changes, so the check before the revocation holds.
func (s *Server) deleteTunnelKey(r *http.Request, p *auth.Principal) (int, any, error) {
	id := r.PathValue("id")
	if _, err := s.lookupTunnelKey(r, p); err != nil {
		return 0, nil, err
	}
	if err := s.st.DeleteTunnelKey(id); errors.Is(err, store.ErrNotFound) {
		return 0, nil, notFound("tunnel key", id)
	} else if err != nil {
		return 0, nil, fmt.Errorf("deleting tunnel key: %w", err)
	}
	s.reg.TerminateKey(id, protocol.CodeKeyRevoked, fmt.Sprintf(revokedReasonFm, id))
	return http.StatusNoContent, nil, nil
}

// renewTunnelKey gives a live key a full TTL from now. An expired key stays
// expired: its session has been ended, and the owner issues a new key, so
// a key that went unrenewed cannot come back to life later.
func (s *Server) renewTunnelKey(r *http.Request, p *auth.Principal) (int, any, error) {
	id := r.PathValue("id")
	if _, err := s.lookupTunnelKey(r, p); err != nil {
		return 0, nil, err
	}
	rec, err := s.st.UpdateTunnelKey(id, s.renewal(actor{p: p}))
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, notFound("tunnel key", id)
	}
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			return 0, nil, ae
		}
		return 0, nil, fmt.Errorf("renewing tunnel key: %w", err)
	}
	return http.StatusOK, s.tunnelKeyOut(rec), nil
}
