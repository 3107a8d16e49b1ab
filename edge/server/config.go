// Package server wires the edge together: store, SSH transport, public
// HTTP(S) listeners, control API and metrics. It is what cmd/tuna-edge runs
// and what tests embed.
package server

import (
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/internal/api"
	"code.tuna.am/tuna/k8s-operator/edge/internal/names"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
)

// DefaultTunnelKeyTTL is a tunnel key's lifetime without renewal: a key
// that leaks from a cluster stops working within a day unless its
// controller keeps renewing it.
const DefaultTunnelKeyTTL = 24 * time.Hour

// Default limits: generous for one cluster's agent, small enough that a
// runaway or hostile client cannot exhaust the edge's memory or sockets.
const (
	DefaultMaxHandshakes     = 64
	DefaultMaxSessionsPerKey = 10
	// DefaultMaxSessionsPerTunnelKey is the default session pool of a
	// tunnel key: room for a few agent replicas and a rolling update's
	// surge, little for a leaked key.
	DefaultMaxSessionsPerTunnelKey = 4
	// MaxTunnelKeyPool bounds the pool size a key may be issued with.
	MaxTunnelKeyPool               = api.MaxPoolSize
	DefaultMaxBindsPerSession      = 16
	DefaultMaxChannelsPerSession   = 1024
	DefaultMaxConnectionsPerTunnel = 1024
	DefaultMaxSecrets              = 1000
)

// The edge's other defaults, set by setDefaults on a Config that leaves
// them out and read by tuna-edge serve's flags: one place, so the binary
// and an embedded edge cannot disagree.
const (
	// DefaultGatewayHTTPPort is where Gateway addresses serve HTTP.
	DefaultGatewayHTTPPort = 80
	// DefaultGatewayHTTPSPort is where Gateway addresses serve HTTPS
	// (with HTTPSListen).
	DefaultGatewayHTTPSPort = 443
	// DefaultTCPListenHost is where TCP endpoints listen: every address,
	// since a TCP endpoint is published to the internet as the public
	// HTTP listeners are. A test or a private edge sets 127.0.0.1.
	DefaultTCPListenHost = "0.0.0.0"
	// DefaultKeepaliveInterval is how often the edge pings a session;
	// DefaultKeepaliveTimeout, three of them, how long an unanswered ping
	// keeps it (a Config without a timeout takes three of its interval).
	DefaultKeepaliveInterval = 15 * time.Second
	DefaultKeepaliveTimeout  = 3 * DefaultKeepaliveInterval
)

// DefaultTCPPortRange is the first and last port TCP endpoints get.
var DefaultTCPPortRange = [2]int{20000, 20999}

// Config configures an Edge. Listen addresses may use port 0; the chosen
// addresses are readable after Start (APIURL, SSHAddr, HTTPAddr, HTTPSAddr).
type Config struct {
	// DataDir holds edge.db (keys, reservations, HTTPS certificates and
	// ticket keys), the SSH host key and the secrets key.
	DataDir string
	// HostKeyFile is the SSH host private key (mode 0600), created on first
	// start; default <DataDir>/ssh_host_ed25519_key.
	HostKeyFile string
	// BaseDomain publishes subdomains: <sub>.<BaseDomain>.
	BaseDomain string

	// APIListen is the control API's address. It always serves HTTPS: with
	// APITLSCert/APITLSKey when set, else with a self-signed certificate
	// generated once in DataDir (see APICertPath), whose fingerprint clients
	// pin. API keys and the SSH host key agents pin travel over it.
	APIListen             string
	APITLSCert, APITLSKey string
	// APICertHosts are extra DNS names or IPs the generated certificate
	// covers, besides loopback, BaseDomain and the advertised SSH host (for
	// clients that trust it as a CA bundle and so check the host name).
	APICertHosts []string
	// InsecureHTTPAPI serves the API in plain HTTP, for use behind a
	// TLS-terminating proxy on a trusted network only; every start warns.
	InsecureHTTPAPI bool
	// APITimeouts bound each API connection (zero fields: the defaults).
	APITimeouts APITimeouts
	// APIRateLimit and APIRateBurst bound the calls of each API key, in
	// requests per second and bucket size (0: 20/s with bursts of 40).
	APIRateLimit float64
	APIRateBurst int

	// SSHListen is the tunnel transport's address; SSHAdvertiseAddr is what
	// GET /v1/edge tells agents to dial (default: the listen address).
	SSHListen, SSHAdvertiseAddr string

	// HTTPListen and HTTPSListen are the public listeners; empty disables one.
	HTTPListen, HTTPSListen string
	// HTTPAdvertiseURL / HTTPSAdvertiseURL override the public bases
	// published in GET /v1/edge and in tunnel URLs (e.g. "https://example.com"
	// behind a load balancer). Default: scheme://BaseDomain:port.
	HTTPAdvertiseURL, HTTPSAdvertiseURL string
	// TLSCertFile/TLSKeyFile: certificate for the HTTPS listener (a wildcard
	// for *.BaseDomain covers every subdomain).
	TLSCertFile, TLSKeyFile string
	// ACMEDirectory enables ACME (HTTP-01 on the HTTP listener, TLS-ALPN-01 on
	// HTTPS) with this directory URL when no certificate file is given.
	ACMEDirectory, ACMEEmail string
	// ACMECAFile is a PEM bundle the edge trusts, besides the system roots,
	// when it talks to the ACME directory: for a private CA such as
	// step-ca, or a test CA.
	ACMECAFile string
	// TLSTicketRotation is how long one session ticket key encrypts new
	// tickets (default 6h); TLSTicketKeysKept is for how many such periods
	// it still decrypts them afterwards (default 3). The keys are shared by
	// every node through the store (package edge/internal/certs).
	TLSTicketRotation time.Duration
	TLSTicketKeysKept int
	// TLSCertCacheSize bounds the certificates each node keeps in memory
	// (default certs.DefaultCacheSize); the rest stay in the store and are
	// loaded on their next handshake.
	TLSCertCacheSize int
	// ACMEChallenges are the ACME challenge types answered, in order of
	// preference (default tls-alpn-01, then http-01).
	ACMEChallenges []string
	// Clock is the clock of the HTTPS listener's state: the ticket key
	// schedule, certificate renewal, OCSP staples. nil is time.Now; tests
	// move it.
	Clock func() time.Time

	// PublicReadHeaderTimeout bounds the TLS handshake and the request
	// headers on the public listeners (default 10s); PublicIdleTimeout
	// closes keep-alive connections idle this long (default 120s).
	// PublicReadTimeout and PublicWriteTimeout bound reading the request and
	// writing the answer when the edge answers itself (404, 502, 403;
	// default 30s each). Proxied requests have no read or write limit: their
	// bodies may stream for as long as the backend wants (see
	// public.Timeouts).
	PublicReadHeaderTimeout, PublicIdleTimeout time.Duration
	PublicReadTimeout, PublicWriteTimeout      time.Duration
	// PublicBodyTimeout bounds each wait for more of a proxied request's
	// body (default 60s; negative: none); PublicExchangeTimeout one whole
	// proxied exchange (default: none). See public.Timeouts.
	PublicBodyTimeout, PublicExchangeTimeout time.Duration

	// GatewayAddresses are addresses of this host that the edge hands out
	// as a Gateway's own address, for an HTTP listener without a hostname:
	// each is served on GatewayHTTPPort (default 80), and a request there
	// goes to the tunnel bound to that address whatever its Host, as an
	// in-cluster Gateway's load balancer address would. The first owner to
	// issue a tunnel key for an address claims it, as a bare subdomain is
	// claimed. Empty: no such listener.
	GatewayAddresses []netip.Addr
	GatewayHTTPPort  int
	// GatewayHTTPSPort is where each Gateway address serves HTTPS (default
	// 443), when the edge serves HTTPS (HTTPSListen): TLS ends there with
	// the certificate the address's holder uploaded (PUT
	// /v1/certificates/{address}), whatever name the client sent, else
	// the default certificate.
	GatewayHTTPSPort int
	// AnyHost lets tunnel keys name any host, not only the subdomains of
	// BaseDomain and reserved custom domains: for a self-hosted edge whose
	// admin lets its owners publish any name (DNS is theirs to point at
	// the edge). The first owner to issue a key for such a host claims it,
	// with the rules of a bare subdomain.
	AnyHost bool

	// TCPPortRange is the first and last port reserved TCP endpoints get.
	TCPPortRange [2]int
	// TCPListenHost is where TCP endpoints listen (default
	// DefaultTCPListenHost, every address);
	// PublicTCPHost is the host in tcp:// URLs (default BaseDomain).
	TCPListenHost, PublicTCPHost string

	// DNSResolver verifies custom domains: host:port of a DNS server,
	// "system" for the OS resolver, empty to disable verification.
	DNSResolver string
	// CNAMETarget is what custom domains must CNAME to (default BaseDomain).
	CNAMETarget string

	// KeepaliveInterval and KeepaliveTimeout tune the SSH keepalives
	// (default 15s and 3 intervals).
	KeepaliveInterval, KeepaliveTimeout time.Duration

	// NoStreams keeps every public connection on SSH channels. By default
	// a TCP endpoint's connections travel on stream connections that the
	// agent dials to the SSH port (package edge/streams): TLS, pinned
	// through the session, about three times the bulk throughput of a
	// channel (docs/benchmarks.md).
	NoStreams bool

	// NoHTTPRelay serves every request of the public HTTP listener with
	// net/http. By default plain HTTP/1.1 requests for a bound host go
	// through the h1 relay (package internal/h1), which parses each head
	// once and pipes bodies; net/http keeps the rest.
	NoHTTPRelay bool

	// NetHTTPH2 serves the h2 connections of the public HTTPS listener
	// with net/http's HTTP/2 server. By default the edge's own HTTP/2
	// server (package edge/internal/h2serve) serves them: it writes each
	// answer's frames inline and one write per batch, about a quarter
	// less CPU per request (docs/benchmarks.md); this is the way back for
	// an operator who hits a problem with it (tuna-edge --edge-h2=false).
	// Without the h1 relay (NoHTTPRelay) net/http serves them either way.
	NetHTTPH2 bool

	// TunnelKeyTTL is how long a tunnel key lives from its creation or last
	// renewal (POST /v1/tunnel-keys/{id}/renew); an expired key cannot log
	// in and its session is ended with key_expired. 0 takes the default
	// (24h); a negative value turns expiry off.
	TunnelKeyTTL time.Duration

	// Limits, each refused at once with the code limit_exceeded and counted
	// in tuna_edge_limit_refusals_total. 0 takes the default; a negative
	// value turns the limit off.
	//
	// MaxHandshakes caps SSH connections that have not finished logging in
	// (default 64): more are closed at once.
	MaxHandshakes int
	// MaxSessionsPerKey caps the live sessions of one tunnels:connect API
	// key (default 10).
	MaxSessionsPerKey int
	// MaxSessionsPerTunnelKey is the default size of a tunnel key's session
	// pool, the live sessions (agent replicas) that may serve its address
	// at once (default 4); a key issued with max_sessions overrides it.
	// It cannot be turned off: a negative value is an error.
	MaxSessionsPerTunnelKey int
	// MaxBindsPerSession caps the addresses one session binds (default 16).
	MaxBindsPerSession int
	// MaxChannelsPerSession caps one session's open forward channels, one
	// per public connection or pooled HTTP connection (default 1024).
	MaxChannelsPerSession int
	// MaxConnectionsPerTunnel caps the concurrent public connections of one
	// TCP endpoint and the requests in flight to one HTTP host (default
	// 1024): HTTP answers 503, TCP is closed at once.
	MaxConnectionsPerTunnel int

	// MaxSecrets caps the number of stored secrets (default 1000): a new
	// one beyond is refused with 409 limit_exceeded.
	MaxSecrets int

	// SecretsKeyFile holds the secrets encryption keys, base64, one per
	// line, the first (primary) encrypting. SecretsKeys are the same given
	// directly (TUNA_EDGE_SECRETS_KEY). With neither, the edge generates
	// <DataDir>/secrets.key (mode 0600) on first start. The keys never go
	// into the database.
	SecretsKeyFile string
	SecretsKeys    []string

	// Etcd, with Endpoints set, keeps the state in etcd, shared by every
	// node of a cluster, instead of <DataDir>/edge.db. Each node must then
	// be given the same SSH host key file, secrets key and API certificate
	// (none is generated).
	Etcd store.EtcdConfig
	// NodeName names this node in a cluster (default: the host name);
	// NodeTTL is the lease of its record (default DefaultNodeTTL).
	NodeName string
	NodeTTL  time.Duration
	// APIAdvertiseURL is this node's API as GET /v1/nodes lists it
	// (default: the listen address).
	APIAdvertiseURL string

	// AccessIdPCAFile is a PEM bundle the edge trusts, besides the system
	// roots, for the identity providers of access policies (a provider
	// with a private CA). AccessIdPRecheck is how long a provider's
	// discovery is trusted before a login checks it again (default 30s):
	// the check that makes new logins fail closed with a clear page when
	// the provider is down.
	AccessIdPCAFile  string
	AccessIdPRecheck time.Duration

	// MetricsListen optionally serves /metrics on its own address; /metrics
	// is always served on the API listener too, without auth.
	MetricsListen string

	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	if c.DataDir == "" {
		return fmt.Errorf("config: DataDir is required")
	}
	c.BaseDomain = names.Normalize(c.BaseDomain)
	if err := names.CheckDomain(c.BaseDomain); err != nil {
		return fmt.Errorf("config: BaseDomain: %w", err)
	}
	if c.APIListen == "" || c.SSHListen == "" {
		return fmt.Errorf("config: APIListen and SSHListen are required")
	}
	if c.HTTPListen == "" && c.HTTPSListen == "" {
		return fmt.Errorf("config: set HTTPListen, HTTPSListen or both")
	}
	if c.GatewayHTTPPort == 0 {
		c.GatewayHTTPPort = DefaultGatewayHTTPPort
	}
	if c.GatewayHTTPPort < 1 || c.GatewayHTTPPort > 65535 {
		return fmt.Errorf("config: GatewayHTTPPort %d is not a port", c.GatewayHTTPPort)
	}
	if c.GatewayHTTPSPort == 0 {
		c.GatewayHTTPSPort = DefaultGatewayHTTPSPort
	}
	if c.GatewayHTTPSPort < 1 || c.GatewayHTTPSPort > 65535 {
		return fmt.Errorf("config: GatewayHTTPSPort %d is not a port", c.GatewayHTTPSPort)
	}
	if c.GatewayHTTPSPort == c.GatewayHTTPPort && c.HTTPSListen != "" && len(c.GatewayAddresses) > 0 {
		return fmt.Errorf("config: the Gateway addresses serve HTTP and HTTPS on one port, %d: set GatewayHTTPSPort (--gateway-https-port) to another", c.GatewayHTTPPort)
	}
	if (c.APITLSCert == "") != (c.APITLSKey == "") {
		return fmt.Errorf("config: set both APITLSCert and APITLSKey, or neither")
	}
	if c.InsecureHTTPAPI && c.APITLSCert != "" {
		return fmt.Errorf("config: InsecureHTTPAPI serves plain HTTP, so APITLSCert/APITLSKey would be ignored: drop one")
	}
	if c.APIRateLimit < 0 || c.APIRateBurst < 0 {
		return fmt.Errorf("config: APIRateLimit %v and APIRateBurst %d must not be negative", c.APIRateLimit, c.APIRateBurst)
	}
	c.APITimeouts.setDefaults()
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return fmt.Errorf("config: set both TLSCertFile and TLSKeyFile, or neither")
	}
	if c.HTTPSListen != "" && c.TLSCertFile == "" && c.ACMEDirectory == "" {
		return fmt.Errorf("config: HTTPSListen needs TLSCertFile/TLSKeyFile or ACMEDirectory")
	}
	if c.TLSTicketRotation < 0 || c.TLSTicketKeysKept < 0 || c.TLSCertCacheSize < 0 {
		return fmt.Errorf("config: TLSTicketRotation %v, TLSTicketKeysKept %d and TLSCertCacheSize %d must not be negative",
			c.TLSTicketRotation, c.TLSTicketKeysKept, c.TLSCertCacheSize)
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.SecretsKeyFile != "" && len(c.SecretsKeys) > 0 {
		return fmt.Errorf("config: set SecretsKeyFile (--secrets-key-file) or SecretsKeys (TUNA_EDGE_SECRETS_KEY), not both")
	}
	if c.HostKeyFile == "" {
		c.HostKeyFile = filepath.Join(c.DataDir, hostKeyFileName)
	}
	if c.TCPPortRange == [2]int{} {
		c.TCPPortRange = DefaultTCPPortRange
	}
	if f, l := c.TCPPortRange[0], c.TCPPortRange[1]; f < 1 || l > 65535 || f > l {
		return fmt.Errorf("config: TCPPortRange %d-%d is not a valid port range", f, l)
	}
	if c.TCPListenHost == "" {
		c.TCPListenHost = DefaultTCPListenHost
	}
	if c.PublicTCPHost == "" {
		c.PublicTCPHost = c.BaseDomain
	}
	if c.CNAMETarget == "" {
		c.CNAMETarget = c.BaseDomain
	}
	if c.KeepaliveInterval <= 0 {
		c.KeepaliveInterval = DefaultKeepaliveInterval
	}
	if c.KeepaliveTimeout <= 0 {
		c.KeepaliveTimeout = 3 * c.KeepaliveInterval
	}
	if c.TunnelKeyTTL == 0 {
		c.TunnelKeyTTL = DefaultTunnelKeyTTL
	}
	for _, l := range []struct {
		v   *int
		def int
	}{
		{&c.MaxHandshakes, DefaultMaxHandshakes},
		{&c.MaxSessionsPerKey, DefaultMaxSessionsPerKey},
		{&c.MaxSessionsPerTunnelKey, DefaultMaxSessionsPerTunnelKey},
		{&c.MaxBindsPerSession, DefaultMaxBindsPerSession},
		{&c.MaxChannelsPerSession, DefaultMaxChannelsPerSession},
		{&c.MaxConnectionsPerTunnel, DefaultMaxConnectionsPerTunnel},
		{&c.MaxSecrets, DefaultMaxSecrets},
	} {
		if *l.v == 0 {
			*l.v = l.def
		}
	}
	if c.MaxSessionsPerTunnelKey < 1 || c.MaxSessionsPerTunnelKey > MaxTunnelKeyPool {
		return fmt.Errorf("max sessions per tunnel key must be 1-%d, got %d: the pool of a tunnel key is always bounded", MaxTunnelKeyPool, c.MaxSessionsPerTunnelKey)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c.checkCluster()
}

// APITimeouts bound the phases of an API connection. API requests and
// answers are small JSON, so short bounds cost honest clients nothing and
// stop slow clients (slowloris) from holding connections open.
type APITimeouts struct {
	// ReadHeader: the TLS handshake and the request headers (default 10s).
	ReadHeader time.Duration
	// Read: the whole request, body included (default 30s).
	Read time.Duration
	// Write: from the end of the headers to the end of the answer; it also
	// bounds a handler's work, such as a DNS check (default 30s).
	Write time.Duration
	// Idle: a kept-alive connection between requests (default 120s).
	Idle time.Duration
}

func (t *APITimeouts) setDefaults() {
	for _, f := range []struct {
		v *time.Duration
		d time.Duration
	}{{&t.ReadHeader, 10 * time.Second}, {&t.Read, 30 * time.Second}, {&t.Write, 30 * time.Second}, {&t.Idle, 120 * time.Second}} {
		if *f.v <= 0 {
			*f.v = f.d
		}
	}
}
