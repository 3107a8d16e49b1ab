package apiwire

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// Scopes an API key can hold.
const (
	// ScopeWrite reserves domains and ports and issues and revokes tunnel keys.
	ScopeWrite = "tunnels:write"
	// ScopeConnect only starts tunnels; it cannot call the API.
	ScopeConnect = "tunnels:connect"
	// ScopeFull is full access, including API key management.
	ScopeFull = "full"
)

// Scopes lists every scope, in the order error messages name them.
var Scopes = []string{ScopeWrite, ScopeConnect, ScopeSecretsRead, ScopeSecretsWrite, ScopeFull}

// ValidScope reports whether s is a known scope.
func ValidScope(s string) bool { return slices.Contains(Scopes, s) }

// ScopeList renders Scopes for error messages: "a", "b" or "c".
func ScopeList() string {
	q := make([]string, len(Scopes))
	for i, s := range Scopes {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// EdgeInfo is what GET /v1/edge returns: what a client needs to reach and
// pin the edge.
type EdgeInfo struct {
	// BaseDomain is the domain under which subdomains are published.
	BaseDomain string `json:"base_domain"`
	// SSHAddr is the host:port agents dial for the tunnel transport.
	SSHAddr string `json:"ssh_addr"`
	// SSHHostKey is the edge's SSH host public key in authorized_keys form;
	// agents pin it instead of trusting on first use.
	SSHHostKey string `json:"ssh_host_key"`
	// HTTPURL is the public HTTP listener's base, e.g. "http://localhost:8080";
	// a subdomain is published as scheme://sub.base_domain[:port].
	HTTPURL string `json:"http_url"`
	// HTTPSURL is the public HTTPS listener's base, empty when TLS is off.
	HTTPSURL string `json:"https_url,omitempty"`
	// TCPHost is the host name published in tcp:// addresses.
	TCPHost string `json:"tcp_host"`
	Version string `json:"version"`
	// DNSVerificationDisabled: the edge checks no DNS (an empty
	// --dns-resolver), so a custom domain is never verified, nor served.
	DNSVerificationDisabled bool `json:"dns_verification_disabled,omitempty"`
	// APIRateLimit is the budget of calls each API key has on this node's
	// API; every answer to an authenticated call repeats it in headers
	// (HeaderRateLimit, HeaderRateBurst).
	APIRateLimit *RateLimit `json:"api_rate_limit,omitempty"`
	// AnyHost: tunnel keys may name any host, claimed by the first owner
	// that publishes it (tuna-edge serve --any-host).
	AnyHost bool `json:"any_host,omitempty"`
	// GatewayAddresses are the addresses the edge hands out one per
	// Gateway whose HTTP listener has no hostname, each serving HTTP on
	// GatewayHTTPPort and routing every request there to the tunnel bound
	// to it, whatever the Host (tuna-edge serve --gateway-addresses).
	GatewayAddresses []string `json:"gateway_addresses,omitempty"`
	GatewayHTTPPort  int      `json:"gateway_http_port,omitempty"`
	// GatewayHTTPSPort is where each Gateway address serves HTTPS, with
	// the certificate its holder uploaded (PUT /v1/certificates/{address});
	// 0: the edge serves no HTTPS.
	GatewayHTTPSPort int `json:"gateway_https_port,omitempty"`
}

// RateLimit is a per-key budget of API calls: a token bucket of Burst
// calls, refilled at PerSecond. A call beyond it is answered 429
// rate_limited with Retry-After.
type RateLimit struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst"`
}

// Headers of every answer to an authenticated API call: the calling key's
// budget (RateLimit), so a client paces itself without asking first.
const (
	HeaderRateLimit = "X-RateLimit-Limit" // calls per second
	HeaderRateBurst = "X-RateLimit-Burst" // calls in a burst
)

// Node is one node of the edge (GET /v1/nodes). A single edge is one
// node; a cluster lists every live node, each announced under an etcd
// lease, so a node that died drops out within seconds.
type Node struct {
	Name string `json:"name"`
	// APIURL is the node's own control API, SSHAddr the address its agents
	// dial; HTTPURL and HTTPSURL are its public listeners.
	APIURL   string `json:"api_url,omitempty"`
	SSHAddr  string `json:"ssh_addr"`
	HTTPURL  string `json:"http_url,omitempty"`
	HTTPSURL string `json:"https_url,omitempty"`
	// Draining: the node takes no new public connections; agents move
	// their sessions off it.
	Draining  bool      `json:"draining,omitempty"`
	StartedAt time.Time `json:"started_at"`
	// Self marks the node that answered.
	Self bool `json:"self,omitempty"`
}

// WhoAmI describes the calling key (GET /v1/whoami).
type WhoAmI struct {
	KeyID  string   `json:"key_id"`
	Name   string   `json:"name,omitempty"`
	Scopes []string `json:"scopes"`
	// SecretPrefix is the key's secret prefix (see CreateAPIKey).
	SecretPrefix string `json:"secret_prefix,omitempty"`
	// OwnerPrefix is the owner prefix the key is bound to (see
	// CreateAPIKey).
	OwnerPrefix string `json:"owner_prefix,omitempty"`
}

// APIKey is an API key record. Key is set only in the create response.
type APIKey struct {
	ID     string   `json:"id"`
	Name   string   `json:"name,omitempty"`
	Scopes []string `json:"scopes"`
	// SecretPrefix, when set, confines the key's secrets scopes to
	// secrets whose names start with it.
	SecretPrefix string `json:"secret_prefix,omitempty"`
	// OwnerPrefix, when set, binds the key to the owners under it.
	OwnerPrefix string    `json:"owner_prefix,omitempty"`
	Key         string    `json:"key,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
}

// CreateAPIKey is the body of POST /v1/api-keys.
type CreateAPIKey struct {
	Name   string   `json:"name,omitempty"`
	Scopes []string `json:"scopes"`
	// SecretPrefix confines secrets:read and secrets:write to secret names
	// that start with it (e.g. "team-a/"); empty: every secret. It is how
	// one team's key is kept from another team's secrets.
	SecretPrefix string `json:"secret_prefix,omitempty"`
	// OwnerPrefix binds a tunnels:write key to a cluster id: the key then
	// creates, changes and deletes only reservations and tunnel keys of
	// owners "<prefix>" and "<prefix>/...", and lists only those tunnel
	// keys, whatever owner a request names. It is how clusters sharing
	// one edge are kept from each other's addresses. Not with full.
	OwnerPrefix string `json:"owner_prefix,omitempty"`
}

// OwnerTransfer is the body of POST /v1/owner-transfers: hand every
// reservation and claim of the owners under From to the same owners under
// To (e.g. a lost cluster's id to its replacement's).
type OwnerTransfer struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// OwnerTransferResult lists what a transfer moved.
type OwnerTransferResult struct {
	From         string   `json:"from"`
	To           string   `json:"to"`
	Domains      []string `json:"domains"`
	TCPEndpoints []string `json:"tcp_endpoints"`
	// Claims are the bare subdomains whose claim moved.
	Claims []string `json:"claims"`
}

// TunnelKey is an ephemeral per-tunnel key: one protocol, optionally one
// address, a bounded pool of live sessions that all serve that address, no
// API access. Key (the secret) is set
// only in the create response; the edge stores a hash.
type TunnelKey struct {
	ID string `json:"id"`
	// Protocol is "http" or "tcp".
	Protocol string `json:"protocol"`
	// Address, when set, is the only address the key may bind: a full host
	// name for http, an alias for tcp.
	Address string            `json:"address,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	// Owner is who the key was issued for (see CreateTunnelKey.Owner).
	Owner     string    `json:"owner,omitempty"`
	Key       string    `json:"key,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is when the key stops working unless renewed (POST
	// /v1/tunnel-keys/{id}/renew); absent when the edge's keys never
	// expire. An expired key cannot log in, and its session is ended with
	// key_expired.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// TTLSeconds is the lifetime a renewal gives: renew when less than half
	// of it is left.
	TTLSeconds int64 `json:"ttl_seconds,omitempty"`
	// Session is the oldest live session of the key's pool, if any.
	Session *Session `json:"session,omitempty"`
	// Sessions are all the live sessions of the key's pool, oldest first.
	Sessions []Session `json:"sessions,omitempty"`
	// MaxSessions is the size of the key's session pool.
	MaxSessions int `json:"max_sessions,omitempty"`
}

// RenewAt is when a key should be renewed: once half of its lifetime is
// gone. ok is false for a key that never expires.
func (k *TunnelKey) RenewAt() (at time.Time, ok bool) {
	if k.ExpiresAt == nil {
		return time.Time{}, false
	}
	return k.ExpiresAt.Add(-time.Duration(k.TTLSeconds) * time.Second / 2), true
}

// Session is a live tunnel session on the edge.
type Session struct {
	ID          string    `json:"id"`
	URL         string    `json:"url"`
	RemoteAddr  string    `json:"remote_addr"`
	ConnectedAt time.Time `json:"connected_at"`
	// Draining: the agent asked for no new connections and is finishing
	// the ones it carries before it disconnects.
	Draining bool `json:"draining,omitempty"`
}

// CreateTunnelKey is the body of POST /v1/tunnel-keys.
type CreateTunnelKey struct {
	Protocol string `json:"protocol"`
	// Address: a subdomain label or a full host name for http (a bare label
	// is expanded under the base domain), an alias for tcp. Empty: any.
	Address string            `json:"address,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	// Owner is an opaque owner identity ("<cluster-id>/<namespace>" from
	// the operator). The key may only use addresses its owner owns, or that
	// are unowned or shared with it; the first key for a bare subdomain no
	// reservation holds claims it for its owner.
	Owner string `json:"owner,omitempty"`
	// MaxSessions sizes the key's session pool: how many live sessions
	// (agent replicas) may serve its address at once, 0-64; 0 takes the
	// edge's default (4). A login past it is refused with limit_exceeded.
	MaxSessions int `json:"max_sessions,omitempty"`
}

// Sharing is who owns a reservation and who else may use it. An empty
// Owner (a reservation made without one) may be used by anyone.
type Sharing struct {
	Owner      string   `json:"owner,omitempty"`
	SharedWith []string `json:"shared_with,omitempty"`
}

// UpdateSharing is the body of PATCH /v1/domains/{name} and
// PATCH /v1/tcp-endpoints/{alias}: the full new list of other owners
// allowed to use the address (empty: none).
type UpdateSharing struct {
	SharedWith *[]string `json:"shared_with,omitempty"`
	// AccessPolicy, domains only: the name of a policy of the domain's
	// owner that guards it, whoever binds it; "" detaches it.
	AccessPolicy *string `json:"access_policy,omitempty"`
}

// Domain is a reserved host name: a subdomain of the base domain or a custom
// domain proven by DNS.
type Domain struct {
	// Name is the full host name.
	Name      string `json:"name"`
	Subdomain string `json:"subdomain,omitempty"`
	Custom    bool   `json:"custom"`
	// Verified is true for subdomains, and for custom domains once their DNS
	// records check out.
	Verified   bool        `json:"verified"`
	DNSRecords []DNSRecord `json:"dns_records,omitempty"`
	// VerifyError says why the last DNS check failed.
	VerifyError string `json:"verify_error,omitempty"`
	// AccessPolicy names the owner's policy that guards the domain.
	AccessPolicy string `json:"access_policy,omitempty"`
	Sharing
	CreatedAt time.Time `json:"created_at"`
}

// DNSRecord is a record a custom domain's owner must create.
type DNSRecord struct {
	Type  string `json:"type"`
	Name  string `json:"name"`
	Value string `json:"value"`
}

// CreateDomain is the body of POST /v1/domains: exactly one of the fields.
type CreateDomain struct {
	Subdomain string `json:"subdomain,omitempty"`
	Domain    string `json:"domain,omitempty"`
	// Sharing sets the owner and the owners it shares with; no owner: anyone
	// may use the domain.
	Sharing
}

// TCPEndpoint is a reserved public TCP port with an alias.
type TCPEndpoint struct {
	Alias   string `json:"alias"`
	Port    int    `json:"port"`
	Address string `json:"address"`
	Sharing
	CreatedAt time.Time `json:"created_at"`
}

// CreateTCPEndpoint is the body of POST /v1/tcp-endpoints.
type CreateTCPEndpoint struct {
	Alias string `json:"alias"`
	// Sharing sets the owner and the owners it shares with; no owner: anyone
	// may use the endpoint.
	Sharing
}

// List wraps every list response.
type List[T any] struct {
	Items []T `json:"items"`
	// Next, in a page of GET /v1/tunnel-keys asked for with a limit, is
	// the after= of the next page; empty on the last.
	Next string `json:"next,omitempty"`
}

// MaxBatch bounds the items of one batch call (POST
// /v1/tunnel-keys/batch and /v1/tunnel-keys/renew) and the limit of a
// page of GET /v1/tunnel-keys.
const (
	MaxBatch = 100
	MaxPage  = 1000
)

// CreateTunnelKeys is the body of POST /v1/tunnel-keys/batch: up to
// MaxBatch keys issued in one call, each as POST /v1/tunnel-keys would.
type CreateTunnelKeys struct {
	Items []CreateTunnelKey `json:"items"`
}

// RenewTunnelKeys is the body of POST /v1/tunnel-keys/renew: up to
// MaxBatch keys renewed in one call, each as its own renew would be.
type RenewTunnelKeys struct {
	IDs []string `json:"ids"`
}

// TunnelKeyResult is one item of a batch answer, in the order of the
// request: the status its own call would have had, and the key (with its
// secret, when issued) or the refusal.
type TunnelKeyResult struct {
	Status int        `json:"status"`
	Key    *TunnelKey `json:"key,omitempty"`
	Error  *APIError  `json:"error,omitempty"`
}

// Err is the item's refusal as an *APIError, nil when it succeeded.
func (r TunnelKeyResult) Err() error {
	if r.Error == nil {
		if r.Key == nil {
			return &APIError{Status: r.Status, Code: CodeInternal, Message: "the batch answer holds neither a key nor an error for this item"}
		}
		return nil
	}
	e := *r.Error
	e.Status = r.Status
	return &e
}

// KeyPageRequest asks for one page of GET /v1/tunnel-keys.
type KeyPageRequest struct {
	// Labels filter as ListTunnelKeys's do.
	Labels map[string]string
	// After is the previous page's Next ("": the first page); Limit the
	// page's size, 1 to MaxPage.
	After string
	Limit int
	// IfNoneMatch is the ETag of the list as last read: the first page
	// answers NotModified when the whole list is still the same.
	IfNoneMatch string
}

// KeyPage is one page of tunnel keys.
type KeyPage struct {
	Items []TunnelKey
	Next  string
	// ETag validates the whole list (answered with the first page).
	ETag        string
	NotModified bool
}

// SessionChanges answers GET /v1/sessions: the live tunnel sessions of
// the keys the caller may see whose labels match, or, asked with
// since=<a cursor it answered>, the sessions that began or ended after
// that answer, so a client that follows them reads what changed, not
// every session again.
type SessionChanges struct {
	// Cursor is this answer's place in the edge's changes: send it back
	// as since= to hear what changed after it.
	Cursor string `json:"cursor"`
	// Full: Items are every live session, and a client that followed
	// the changes starts again from them; the answer to a request
	// without since=, or whose since= the edge no longer holds the
	// changes after (too old, or from before the edge restarted).
	Full  bool            `json:"full"`
	Items []SessionChange `json:"items"`
}

// SessionChange is a session that is live (or began), or that ended.
type SessionChange struct {
	KeyID string `json:"key_id"`
	ID    string `json:"id"`
	Ended bool   `json:"ended,omitempty"`
}
