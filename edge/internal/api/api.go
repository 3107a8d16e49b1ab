// Package api is the edge's control API: JSON over HTTP, Bearer API keys,
// errors as {"code","error","request_id"}. Its wire types are those of
// edge/client, so the server and the client cannot drift apart.
package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	edgeaccess "code.tuna.am/tuna/k8s-operator/edge/internal/access"
	"code.tuna.am/tuna/k8s-operator/edge/internal/auth"
	"code.tuna.am/tuna/k8s-operator/edge/internal/dnsverify"
	"code.tuna.am/tuna/k8s-operator/edge/internal/keyhash"
	"code.tuna.am/tuna/k8s-operator/edge/internal/registry"
	"code.tuna.am/tuna/k8s-operator/edge/internal/secrets"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
	"code.tuna.am/tuna/k8s-operator/edge/internal/tcpports"
	"code.tuna.am/tuna/k8s-operator/edge/keys"
	"code.tuna.am/tuna/k8s-operator/edge/metrics"
)

// MaxBody bounds request bodies; every valid body is tiny, so a larger one
// is refused with 413 request_too_large before it is read further.
const MaxBody = 1 << 20

// Config is what the API needs to know about the edge.
type Config struct {
	BaseDomain string
	// CNAMETarget is what custom domains must CNAME to (default BaseDomain).
	CNAMETarget               string
	TCPPortFirst, TCPPortLast int
	PublicTCPHost             string
	// GatewayAddresses are the edge's addresses that HTTP tunnel keys may
	// name, claimed by the first owner (server.Config.GatewayAddresses).
	GatewayAddresses []netip.Addr
	// AnyHost lets HTTP tunnel keys name any host, claimed by the first
	// owner (server.Config.AnyHost).
	AnyHost bool
	// Ports binds the port of each new TCP endpoint before it is recorded.
	Ports *tcpports.Manager
	// EdgeInfo renders GET /v1/edge (addresses are known only after listen).
	EdgeInfo func() apiwire.EdgeInfo
	// Nodes renders GET /v1/nodes: the edge's live nodes.
	Nodes    func() ([]apiwire.Node, error)
	Verifier *dnsverify.Verifier
	Logger   *slog.Logger
	// Now is the clock (tests may pin it).
	Now func() time.Time
	// TunnelKeyTTL is how long a tunnel key lives from its creation or last
	// renewal; 0 means keys never expire.
	TunnelKeyTTL time.Duration
	// RateLimit and RateBurst bound the calls of each API key (a token
	// bucket per key id); 0 uses DefaultRateLimit and DefaultRateBurst.
	RateLimit rate.Limit
	RateBurst int
	// Secrets serves /v1/secrets; nil leaves those routes out.
	Secrets *secrets.Manager
	// Access serves /v1/access-policies and /v1/access; nil leaves those
	// routes out.
	Access *edgeaccess.Keeper
	// Certificates serves /v1/certificates (hosts' own certificates); nil
	// (an edge without HTTPS) leaves those routes out.
	Certificates Certificates
	// DefaultPoolSize is the session pool of a tunnel key issued without
	// max_sessions, as reported in its max_sessions.
	DefaultPoolSize int
}

// MaxPoolSize bounds the max_sessions a tunnel key may be issued with.
const MaxPoolSize = 64

// Server is the API's http.Handler.
type Server struct {
	cfg Config
	st  *store.Store
	reg *registry.Registry
	m   *metrics.Metrics
	log *slog.Logger
	mux *http.ServeMux
	lim *limiters
	// patterns are the registered routes (checked against openapi.json).
	patterns []string
	// closing is closed by Shutdown: long polls answer at once.
	closing   chan struct{}
	closeOnce sync.Once
}

// access is what a route demands of the caller.
type access int

const (
	// anyAPIKey: any API key, whatever its scopes (edge facts, whoami).
	anyAPIKey access = iota
	// writeAccess: tunnels:write or full.
	writeAccess
	// fullAccess: full only (API key management).
	fullAccess
	// secretsRead and secretsWrite: that scope or full.
	secretsRead
	secretsWrite
	// public: no key (the OpenAPI document).
	public
)

// apiError is a handler's refusal.
type apiError struct {
	status int
	code   string
	msg    string
	// owner and address are sent with address_owned, and claim when the
	// owner holds the address by a claim, not a reservation.
	owner, address string
	claim          bool
	// retryAfter is sent as Retry-After when set (rate_limited).
	retryAfter time.Duration
}

func (e *apiError) Error() string { return e.msg }

func fail(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

// handlerFunc returns the status and body to write, or an error; a non-API
// error is logged and answered as internal without leaking its text.
type handlerFunc func(r *http.Request, p *auth.Principal) (int, any, error)

// writerHandlerFunc is a handlerFunc that also sets response headers or
// deadlines itself (the long-polling list of secrets).
type writerHandlerFunc func(w http.ResponseWriter, r *http.Request, p *auth.Principal) (int, any, error)

// New builds the API handler.
func New(cfg Config, st *store.Store, reg *registry.Registry, m *metrics.Metrics) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return time.Now().UTC() }
	}
	if cfg.CNAMETarget == "" {
		cfg.CNAMETarget = cfg.BaseDomain
	}
	s := &Server{cfg: cfg, st: st, reg: reg, m: m, log: cfg.Logger.With("component", "api"), mux: http.NewServeMux(),
		lim: newLimiters(cfg.RateLimit, cfg.RateBurst), closing: make(chan struct{})}
	s.routes()
	return s
}

func (s *Server) routes() {
	s.handle("GET /v1/openapi.json", public, s.openAPI)
	s.handle("GET /v1/edge", anyAPIKey, s.getEdge)
	s.handle("GET /v1/whoami", anyAPIKey, s.whoAmI)
	s.handle("GET /v1/nodes", anyAPIKey, s.listNodes)

	s.handle("POST /v1/api-keys", fullAccess, s.createAPIKey)
	s.handle("GET /v1/api-keys", fullAccess, s.listAPIKeys)
	s.handle("DELETE /v1/api-keys/{id}", fullAccess, s.deleteAPIKey)
	s.handle("POST /v1/owner-transfers", fullAccess, s.transferOwners)

	s.handle("POST /v1/tunnel-keys", writeAccess, s.createTunnelKey)
	s.handleW("POST /v1/tunnel-keys/batch", writeAccess, s.createTunnelKeys)
	s.handleW("POST /v1/tunnel-keys/renew", writeAccess, s.renewTunnelKeys)
	s.handleW("GET /v1/tunnel-keys", writeAccess, s.listTunnelKeys)
	s.handle("GET /v1/tunnel-keys/{id}", writeAccess, s.getTunnelKey)
	s.handle("DELETE /v1/tunnel-keys/{id}", writeAccess, s.deleteTunnelKey)
	s.handle("POST /v1/tunnel-keys/{id}/renew", writeAccess, s.renewTunnelKey)
	s.handle("GET /v1/sessions", writeAccess, s.listSessions)

	s.handle("POST /v1/domains", writeAccess, s.createDomain)
	s.handle("GET /v1/domains", writeAccess, s.listDomains)
	s.handle("GET /v1/domains/{name}", writeAccess, s.getDomain)
	s.handle("DELETE /v1/domains/{name}", writeAccess, s.deleteDomain)
	s.handle("PATCH /v1/domains/{name}", writeAccess, s.shareDomain)
	s.handle("POST /v1/domains/{name}/verify", writeAccess, s.verifyDomain)

	s.handle("POST /v1/tcp-endpoints", writeAccess, s.createTCPEndpoint)
	s.handle("GET /v1/tcp-endpoints", writeAccess, s.listTCPEndpoints)
	s.handle("GET /v1/tcp-endpoints/{alias}", writeAccess, s.getTCPEndpoint)
	s.handle("PATCH /v1/tcp-endpoints/{alias}", writeAccess, s.shareTCPEndpoint)
	s.handle("DELETE /v1/tcp-endpoints/{alias}", writeAccess, s.deleteTCPEndpoint)

	if s.cfg.Secrets != nil {
		s.handleW("GET /v1/secrets", secretsRead, s.listSecrets)
		s.handle("GET /v1/secrets/{name...}", secretsRead, s.getSecret)
		s.handle("PUT /v1/secrets/{name...}", secretsWrite, s.putSecret)
		s.handle("DELETE /v1/secrets/{name...}", secretsWrite, s.deleteSecret)
	}

	if s.cfg.Access != nil {
		s.accessRoutes()
	}

	if s.cfg.Certificates != nil {
		s.certificateRoutes()
	}

	// Everything else gets a JSON not_found rather than the mux's text.
	s.handle("/", public, func(r *http.Request, _ *auth.Principal) (int, any, error) {
		return 0, nil, fail(http.StatusNotFound, apiwire.CodeNotFound, "no API route %s %s", r.Method, r.URL.Path)
	})
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Shutdown ends waiting long polls (they answer 304 at once), so the HTTP
// server's graceful shutdown, which waits for active handlers, is not held
// up by them. The edge registers it with http.Server.RegisterOnShutdown.
func (s *Server) Shutdown() { s.closeOnce.Do(func() { close(s.closing) }) }

// Patterns returns the registered route patterns.
func (s *Server) Patterns() []string { return append([]string(nil), s.patterns...) }

func (s *Server) handle(pattern string, need access, h handlerFunc) {
	s.handleW(pattern, need, func(_ http.ResponseWriter, r *http.Request, p *auth.Principal) (int, any, error) {
		return h(r, p)
	})
}

func (s *Server) handleW(pattern string, need access, h writerHandlerFunc) {
	route := pattern
	if pattern == "/" {
		route = "unmatched"
	}
	s.patterns = append(s.patterns, pattern)
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		reqID := "req_" + keyhash.RandomToken(8)
		w.Header().Set("X-Request-Id", reqID)
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		status, body, err := s.call(w, r, need, h)
		if err != nil {
			ae := s.refusal(err, route, reqID)
			status = ae.status
			if ae.retryAfter > 0 {
				w.Header().Set("Retry-After", retryAfterSeconds(ae.retryAfter))
			}
			body = ae.wire(reqID)
		}
		s.m.APIRequest(route, status)
		writeJSON(w, status, body)
	})
}

// refusal is the API's answer to a handler's error: an API refusal as
// it is, an unreachable state store as 503 state_unavailable, anything
// else logged and answered as internal without its text.
func (s *Server) refusal(err error, route, reqID string) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	if errors.Is(err, store.ErrUnavailable) {
		s.log.Warn("API request refused: the state store is unavailable", "route", route, "request_id", reqID, "err", err)
		ae = fail(http.StatusServiceUnavailable, apiwire.CodeStateUnavailable,
			"the edge cannot reach its state store (etcd lost quorum or is unreachable), so nothing can change now; "+
				"established tunnels keep serving: retry later (request %s)", reqID)
		ae.retryAfter = 5 * time.Second
		return ae
	}
	s.log.Error("API request failed", "route", route, "request_id", reqID, "err", err)
	return fail(http.StatusInternalServerError, apiwire.CodeInternal, "internal error; see the edge's log for request %s", reqID)
}

// wire is the refusal as the API writes it.
func (e *apiError) wire(reqID string) apiwire.APIError {
	return apiwire.APIError{Code: e.code, Message: e.msg, RequestID: reqID, Owner: e.owner, Address: e.address, Claim: e.claim}
}

func (s *Server) call(w http.ResponseWriter, r *http.Request, need access, h writerHandlerFunc) (int, any, error) {
	if need == public {
		return h(w, r, nil)
	}
	p, err := s.authenticate(r)
	if err != nil {
		return 0, nil, err
	}
	s.lim.advertise(w.Header())
	// Limited per key id after authentication: ids are then known to
	// exist, and a valid key's budget cannot be spent by someone guessing.
	if err := s.lim.allow(p.ID, time.Now()); err != nil {
		return 0, nil, err
	}
	if err := authorize(p, need); err != nil {
		return 0, nil, err
	}
	return h(w, r, p)
}

func (s *Server) authenticate(r *http.Request) (*auth.Principal, error) {
	h := r.Header.Get("Authorization")
	secret, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || strings.TrimSpace(secret) == "" {
		return nil, fail(http.StatusUnauthorized, apiwire.CodeUnauthorized, "missing API key: send 'Authorization: Bearer <key>'")
	}
	p, err := auth.Authenticate(s.st, strings.TrimSpace(secret))
	if errors.Is(err, auth.ErrInvalidKey) {
		return nil, fail(http.StatusUnauthorized, apiwire.CodeUnauthorized, "invalid or revoked API key")
	}
	var expired *auth.ExpiredError
	if errors.As(err, &expired) {
		return nil, fail(http.StatusUnauthorized, apiwire.CodeKeyExpired, "%v", expired)
	}
	if err != nil {
		return nil, fmt.Errorf("authenticating: %w", err)
	}
	return p, nil
}

func authorize(p *auth.Principal, need access) error {
	if p.Kind == keys.KindTunnel {
		return fail(http.StatusForbidden, apiwire.CodeForbidden,
			"this is a tunnel key: it can only open one SSH tunnel and has no API access; call the API with an API key")
	}
	switch need {
	case anyAPIKey:
		return nil
	case writeAccess:
		if p.Has(apiwire.ScopeWrite) {
			return nil
		}
		return fail(http.StatusForbidden, apiwire.CodeForbidden,
			"API key %s has scopes %v; this call needs %q or %q", p.ID, p.Scopes, apiwire.ScopeWrite, apiwire.ScopeFull)
	case fullAccess:
		if p.Has(apiwire.ScopeFull) {
			return nil
		}
		return fail(http.StatusForbidden, apiwire.CodeForbidden,
			"API key %s has scopes %v; managing API keys needs %q", p.ID, p.Scopes, apiwire.ScopeFull)
	case secretsRead, secretsWrite:
		scope := apiwire.ScopeSecretsRead
		if need == secretsWrite {
			scope = apiwire.ScopeSecretsWrite
		}
		if p.Has(scope) {
			return nil
		}
		return fail(http.StatusForbidden, apiwire.CodeForbidden,
			"API key %s has scopes %v; this call needs %q or %q", p.ID, p.Scopes, scope, apiwire.ScopeFull)
	}
	return fail(http.StatusForbidden, apiwire.CodeForbidden, "forbidden")
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	if body == nil {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(body)
}

// decode reads exactly one JSON object, refusing unknown fields by name so
// that a typo in a field is an error rather than a silently ignored value.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return fail(http.StatusRequestEntityTooLarge, apiwire.CodeTooLarge,
				"request body is larger than %d bytes; every valid request is far smaller", mbe.Limit)
		}
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return fail(http.StatusBadRequest, apiwire.CodeUnknownField, "unknown field %s in request body", f)
		}
		if errors.Is(err, io.EOF) {
			return fail(http.StatusBadRequest, apiwire.CodeInvalidRequest, "request body is empty; expected a JSON object")
		}
		return fail(http.StatusBadRequest, apiwire.CodeInvalidRequest, "malformed JSON request body: %v", err)
	}
	if dec.More() {
		return fail(http.StatusBadRequest, apiwire.CodeInvalidRequest, "request body has data after the JSON object")
	}
	return nil
}

func notFound(kind, name string) error {
	return fail(http.StatusNotFound, apiwire.CodeNotFound, "%s %q not found", kind, name)
}
