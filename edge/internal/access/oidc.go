package access

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// oidcRule admits users who log in with an OpenID Connect provider, by
// the authorization code flow with state, nonce and PKCE (S256). The edge
// is the client: the redirect URI is https://<host>/.tuna/callback of each
// protected host.
type oidcRule struct {
	issuer, clientID, secret string
	scopes                   []string
	groupsClaim              string
	emails, domains, groups  []string
	claims                   []apiwire.ClaimMatch
	// id names the provider and the claims rule in the sessions it makes:
	// a session opens only the rules with the same id.
	id string
}

func compileOIDC(in *apiwire.OIDCRule, _ *Engine) (*oidcRule, error) {
	if err := checkIssuer(in.IssuerURL); err != nil {
		return nil, fmt.Errorf("oidc: %w", err)
	}
	if in.ClientID == "" {
		return nil, errors.New("oidc: client_id is required")
	}
	o := &oidcRule{issuer: strings.TrimSuffix(in.IssuerURL, "/"), clientID: in.ClientID, secret: in.ClientSecret,
		groupsClaim: in.GroupsClaim, claims: in.AllowedClaims}
	if o.groupsClaim == "" {
		o.groupsClaim = defaultGroupsClaim
	}
	o.scopes = in.Scopes
	if len(o.scopes) == 0 {
		o.scopes = []string{"email", "profile"}
	}
	if !slices.Contains(o.scopes, oidc.ScopeOpenID) {
		o.scopes = append([]string{oidc.ScopeOpenID}, o.scopes...)
	}
	for _, l := range [][]string{in.AllowedEmails, in.AllowedDomains, in.AllowedGroups} {
		if len(l) > MaxListEntries {
			return nil, fmt.Errorf("oidc: at most %d entries in each allowed list", MaxListEntries)
		}
	}
	for _, e := range in.AllowedEmails {
		o.emails = append(o.emails, strings.ToLower(e))
	}
	for _, d := range in.AllowedDomains {
		o.domains = append(o.domains, "@"+strings.ToLower(strings.TrimPrefix(d, "@")))
	}
	o.groups = in.AllowedGroups
	for _, c := range in.AllowedClaims {
		if c.Name == "" || len(c.Values) == 0 {
			return nil, errors.New("oidc: each allowed claim needs a name and values")
		}
	}
	claims, _ := json.Marshal(o.claims)
	sum := sha256.Sum256([]byte(o.issuer + "\x00" + o.clientID + "\x00" + string(claims)))
	o.id = "oidc:" + hex.EncodeToString(sum[:8])
	return o, nil
}

// allows reports whether the rule's lists admit a session's identity:
// checked at every request, so a user taken off a list is refused at once.
// No list admits every user the provider logs in.
func (o *oidcRule) allows(s *Session) bool {
	if len(o.emails) == 0 && len(o.domains) == 0 && len(o.groups) == 0 {
		return true
	}
	email := strings.ToLower(s.Email)
	if email != "" {
		if slices.Contains(o.emails, email) {
			return true
		}
		for _, d := range o.domains {
			if strings.HasSuffix(email, d) {
				return true
			}
		}
	}
	for _, g := range s.Groups {
		if slices.Contains(o.groups, g) {
			return true
		}
	}
	return false
}

// claimsAllow checks the allowed claims of an ID token, at login.
func (o *oidcRule) claimsAllow(claims map[string]any) bool {
	for _, c := range o.claims {
		if !claimHas(claims[c.Name], c.Values) {
			return false
		}
	}
	return true
}

func claimHas(v any, values []string) bool {
	switch v := v.(type) {
	case string:
		return slices.Contains(values, v)
	case bool:
		return slices.Contains(values, fmt.Sprint(v))
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok && slices.Contains(values, s) {
				return true
			}
		}
	}
	return false
}

// sessionFrom turns verified ID token claims into a session. An e-mail
// the provider marks as not verified is not taken.
func (o *oidcRule) sessionFrom(claims map[string]any) *Session {
	s := &Session{Method: MethodOIDC, Provider: o.id}
	s.Subject, _ = claims["sub"].(string)
	if email, _ := claims["email"].(string); email != "" {
		if v, present := claims["email_verified"]; !present || v == true {
			s.Email = email
		}
	}
	s.Name, _ = claims["name"].(string)
	if s.Name == "" {
		s.Name, _ = claims["preferred_username"].(string)
	}
	switch g := claims[o.groupsClaim].(type) {
	case []any:
		for _, e := range g {
			if str, ok := e.(string); ok && len(s.Groups) < 64 && len(str) <= 256 {
				s.Groups = append(s.Groups, str)
			}
		}
	case string:
		s.Groups = []string{g}
	}
	return s
}

// providers caches each issuer's discovery document and keys. A login
// needs them; a request with a session never does. The cache is checked
// again after recheck: the check is the discovery request itself, so an
// unreachable provider is found before the browser is sent to it, and new
// logins fail closed with a page that says so.
type providers struct {
	client  *http.Client
	recheck time.Duration

	mu  sync.Mutex
	all map[string]*providerState
}

type providerState struct {
	mu      sync.Mutex
	p       *oidc.Provider
	checked time.Time
	err     error
	failed  time.Time
}

// failedFor is how long a failed discovery is answered from the cache.
const failedFor = 5 * time.Second

// ErrProviderUnreachable wraps every failure to reach an identity
// provider.
var ErrProviderUnreachable = errors.New("the identity provider cannot be reached")

func (ps *providers) ctx() context.Context {
	return oidc.ClientContext(context.Background(), ps.client)
}

func (ps *providers) get(issuer string, now time.Time) (*oidc.Provider, error) {
	ps.mu.Lock()
	st := ps.all[issuer]
	if st == nil {
		st = &providerState{}
		ps.all[issuer] = st
	}
	ps.mu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.p != nil && now.Sub(st.checked) < ps.recheck {
		return st.p, nil
	}
	if st.err != nil && now.Sub(st.failed) < failedFor {
		return nil, st.err
	}
	// The provider's key set keeps the context for its own fetches, so
	// it is not one that ends; the client's timeout bounds each request.
	p, err := oidc.NewProvider(ps.ctx(), issuer)
	if err != nil {
		st.err, st.failed = fmt.Errorf("%w: %s: %w", ErrProviderUnreachable, issuer, err), now
		return nil, st.err
	}
	st.p, st.checked, st.err = p, now, nil
	return p, nil
}

// config is the OAuth 2.0 client of rule o for a host reached at origin
// (scheme://authority).
func (o *oidcRule) config(p *oidc.Provider, origin string) *oauth2.Config {
	return &oauth2.Config{ClientID: o.clientID, ClientSecret: o.secret, Endpoint: p.Endpoint(),
		RedirectURL: origin + CallbackPath, Scopes: o.scopes}
}
