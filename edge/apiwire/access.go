package apiwire

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// AccessPolicy is an access policy as the control API takes and returns
// it: who may reach the addresses it is attached to, decided by the edge
// before a request enters a tunnel (docs/access.md). It is owned like a
// reservation; its name is unique per owner. The secret parts (an OIDC
// client secret, an htpasswd file, a links key) are written, never read
// back: GET answers them empty, with Digest telling whether they changed.
type AccessPolicy struct {
	// Name is the policy's name within its owner (a DNS label, as a
	// Kubernetes name).
	Name string `json:"name"`
	// Owner is who the policy belongs to ("<cluster-id>/<namespace>"
	// from the operator): only an address of this owner may be protected
	// by it.
	Owner string `json:"owner"`
	// Rules are evaluated in order (docs/access.md#how-rules-decide).
	Rules []AccessRule `json:"rules"`
	// SessionLifetimeSeconds bounds a login's session (0: 12 hours; at
	// most 30 days).
	SessionLifetimeSeconds int64 `json:"session_lifetime_seconds,omitempty"`
	// RateLimits bound requests per client address and per identity.
	RateLimits *AccessRateLimits `json:"rate_limits,omitempty"`
	// NoIdentityHeaders stops the identity fields and the assertion
	// going to the upstream (they go by default).
	NoIdentityHeaders bool `json:"no_identity_headers,omitempty"`
	// RequestHeaders and ResponseHeaders are edits of what passes.
	RequestHeaders  *HeaderEdits `json:"request_headers,omitempty"`
	ResponseHeaders *HeaderEdits `json:"response_headers,omitempty"`
	// DenyPage and MaintenancePage are HTML answered instead of the
	// edge's own pages.
	DenyPage        string `json:"deny_page,omitempty"`
	MaintenancePage string `json:"maintenance_page,omitempty"`
	// Maintenance answers every request 503 with the maintenance page.
	Maintenance bool `json:"maintenance,omitempty"`

	// Digest is the SHA-256 of the policy as stored, secrets included
	// (output only): a client compares it to decide whether to write.
	Digest    string    `json:"digest,omitempty"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// AccessRule is one rule: where it applies, and exactly one of what it
// does.
type AccessRule struct {
	Name string `json:"name,omitempty"`
	// PathPrefixes and Methods limit the requests the rule applies to;
	// empty: all.
	PathPrefixes []string `json:"path_prefixes,omitempty"`
	Methods      []string `json:"methods,omitempty"`

	Public    bool           `json:"public,omitempty"`
	Deny      bool           `json:"deny,omitempty"`
	IP        *IPRule        `json:"ip,omitempty"`
	OIDC      *OIDCRule      `json:"oidc,omitempty"`
	BasicAuth *BasicAuthRule `json:"basic_auth,omitempty"`
	Links     *LinksRule     `json:"links,omitempty"`
}

// IPRule admits clients by address, as a Tunnel's allowCIDRs and
// denyCIDRs do: deny wins, an empty allow list admits everyone not denied.
type IPRule struct {
	AllowCIDRs []string `json:"allow_cidrs,omitempty"`
	DenyCIDRs  []string `json:"deny_cidrs,omitempty"`
}

// OIDCRule admits users who log in with an OpenID Connect provider.
type OIDCRule struct {
	IssuerURL    string   `json:"issuer_url"`
	ClientID     string   `json:"client_id"`
	ClientSecret string   `json:"client_secret,omitempty"`
	Scopes       []string `json:"scopes,omitempty"`
	// GroupsClaim names the ID token's claim that lists the groups
	// (default "groups").
	GroupsClaim    string       `json:"groups_claim,omitempty"`
	AllowedEmails  []string     `json:"allowed_emails,omitempty"`
	AllowedDomains []string     `json:"allowed_domains,omitempty"`
	AllowedGroups  []string     `json:"allowed_groups,omitempty"`
	AllowedClaims  []ClaimMatch `json:"allowed_claims,omitempty"`
}

// ClaimMatch admits an ID token whose claim Name holds one of Values (a
// string claim, or a list that contains one).
type ClaimMatch struct {
	Name   string   `json:"name"`
	Values []string `json:"values"`
}

// BasicAuthRule admits the users of an htpasswd file (bcrypt only).
type BasicAuthRule struct {
	Htpasswd string `json:"htpasswd,omitempty"`
	Realm    string `json:"realm,omitempty"`
}

// LinksRule admits whoever follows a shareable link signed with Key.
type LinksRule struct {
	Key string `json:"key,omitempty"`
}

// AccessRateLimits are the policy's request budgets.
type AccessRateLimits struct {
	PerClientIP *RequestRate `json:"per_client_ip,omitempty"`
	PerIdentity *RequestRate `json:"per_identity,omitempty"`
}

// RequestRate is Requests per PeriodSeconds, in a bucket that holds
// Requests: a burst of Requests, then one every PeriodSeconds/Requests.
type RequestRate struct {
	Requests      int   `json:"requests"`
	PeriodSeconds int64 `json:"period_seconds"`
}

// HeaderEdits sets and removes header fields.
type HeaderEdits struct {
	Set    map[string]string `json:"set,omitempty"`
	Remove []string          `json:"remove,omitempty"`
}

// AccessKeys is GET /v1/access/keys: the ids of the keys that seal
// sessions and sign assertions, the first of each in use.
type AccessKeys struct {
	SessionKeys   []string  `json:"session_keys"`
	AssertionKeys []string  `json:"assertion_keys"`
	RotatedAt     time.Time `json:"rotated_at,omitzero"`
}

// PolicyDigest is the SHA-256 of a policy's content, secrets included, as it
// would be stored: a writer compares it to skip a write that changes
// nothing. The edge stores it as the policy's Digest.
func PolicyDigest(p AccessPolicy) string {
	p.Digest, p.UpdatedAt = "", time.Time{}
	b, _ := json.Marshal(p)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
