package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"code.tuna.am/tuna/k8s-operator/edge/internal/access"
	"code.tuna.am/tuna/k8s-operator/edge/internal/certs"
	"code.tuna.am/tuna/k8s-operator/edge/internal/public"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/internal/atomicfile"
	"code.tuna.am/tuna/k8s-operator/internal/version"
)

func newServe() *cobra.Command {
	var (
		cfg       server.Config
		portRange string
		// gatewayAddrs is --gateway-addresses, parsed by
		// server.ParseAddresses.
		gatewayAddrs string
		// edgeH2 is --edge-h2, on by default: Config.NetHTTPH2 is its
		// opposite, so that a Config's zero value serves h2 the default way.
		edgeH2    bool
		logLevel  string
		logFormat string
		bootstrap string
		pprofAddr string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the edge (SIGTERM/SIGINT stop it gracefully)",
		Long: "Run the edge. Every flag can also be set by environment variable: " +
			"--base-domain is TUNA_EDGE_BASE_DOMAIN, and so on.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if cfg.TCPPortRange, err = parseRange(portRange); err != nil {
				return err
			}
			if cfg.GatewayAddresses, err = server.ParseAddresses(gatewayAddrs); err != nil {
				return fmt.Errorf("--gateway-addresses: %w", err)
			}
			cfg.NetHTTPH2 = !edgeH2
			if cfg.Logger, err = newLogger(logLevel, logFormat); err != nil {
				return err
			}
			cfg.Logger.Info("starting tuna-edge", version.Get().KeysAndValues()...)
			e, err := server.New(cfg)
			if err != nil {
				return err
			}
			if bootstrap != "" {
				if err := bootstrapKey(e, bootstrap); err != nil {
					_ = e.Close()
					return err
				}
			}
			if pprofAddr != "" {
				stopPprof, err := startPprof(pprofAddr, cfg.Logger)
				if err != nil {
					_ = e.Close()
					return err
				}
				defer stopPprof()
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			if err := e.Start(ctx); err != nil {
				return err
			}
			<-ctx.Done()
			cfg.Logger.Info("shutting down: terminating sessions")
			return e.Close()
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", "/var/lib/tuna-edge", "directory of the state database (keys, reservations) and the SSH host key")
	f.StringVar(&cfg.HostKeyFile, "host-key-file", "", "SSH host private key, mode 0600, created on first start (default <data-dir>/ssh_host_ed25519_key)")
	f.StringVar(&cfg.BaseDomain, "base-domain", "", "domain under which subdomains are published (required), e.g. tunnels.example.com")
	f.StringVar(&cfg.APIListen, "api-listen", ":8443", "control API listen address")
	f.StringVar(&cfg.APITLSCert, "api-tls-cert", "", "certificate file for the API (default: a self-signed one generated in --data-dir; see api-fingerprint)")
	f.StringVar(&cfg.APITLSKey, "api-tls-key", "", "private key file for the API")
	f.StringSliceVar(&cfg.APICertHosts, "api-cert-hosts", nil, "extra DNS names or IPs of the generated API certificate, e.g. the host of the operator's edge.apiURL")
	f.BoolVar(&cfg.InsecureHTTPAPI, "insecure-http-api", false, "serve the API in plain HTTP (API keys travel in clear): only behind a TLS-terminating proxy on a trusted network")
	f.Float64Var(&cfg.APIRateLimit, "api-rate-limit", 20, "API requests per second allowed per API key (answers 429 rate_limited with Retry-After beyond)")
	f.IntVar(&cfg.APIRateBurst, "api-rate-burst", 40, "API requests per API key allowed in a burst above --api-rate-limit")
	f.StringVar(&cfg.SSHListen, "ssh-listen", ":2222", "SSH tunnel transport listen address")
	f.StringVar(&cfg.SSHAdvertiseAddr, "ssh-advertise-addr", "", "host:port agents dial (default: the listen address)")
	f.StringVar(&cfg.HTTPListen, "http-listen", ":80", "public HTTP listen address (empty disables)")
	f.StringVar(&cfg.HTTPSListen, "https-listen", "", "public HTTPS listen address (needs --tls-cert-file or --acme-directory)")
	f.StringVar(&cfg.HTTPAdvertiseURL, "http-advertise-url", "", "public HTTP base URL (default http://<base-domain>[:port])")
	f.StringVar(&cfg.HTTPSAdvertiseURL, "https-advertise-url", "", "public HTTPS base URL (default https://<base-domain>[:port])")
	f.StringVar(&cfg.TLSCertFile, "tls-cert-file", "", "public TLS certificate (a wildcard for *.<base-domain>)")
	f.StringVar(&cfg.TLSKeyFile, "tls-key-file", "", "public TLS private key")
	f.DurationVar(&cfg.PublicReadHeaderTimeout, "public-read-header-timeout", public.DefaultReadHeaderTimeout, "public listeners: limit for the TLS handshake and a request's headers (cuts off slowloris clients)")
	f.DurationVar(&cfg.PublicIdleTimeout, "public-idle-timeout", public.DefaultIdleTimeout, "public listeners: close keep-alive connections idle this long")
	f.DurationVar(&cfg.PublicReadTimeout, "public-read-timeout", public.DefaultReadTimeout, "public listeners: limit for reading a request the edge answers itself (404, 502, 403); proxied requests stream without limit")
	f.DurationVar(&cfg.PublicWriteTimeout, "public-write-timeout", public.DefaultWriteTimeout, "public listeners: limit for writing an answer of the edge's own; proxied answers stream without limit")
	f.DurationVar(&cfg.PublicBodyTimeout, "public-body-timeout", public.DefaultBodyTimeout, "public listeners: cut off a client whose request body stalls this long between two reads, freeing its tunnel's slot (negative: never)")
	f.DurationVar(&cfg.PublicExchangeTimeout, "public-exchange-timeout", 0, "public listeners: limit for one proxied exchange, request head to the answer's end; 504 when no answer began (0: none, so long polls and streams are not cut)")
	f.StringVar(&cfg.ACMEDirectory, "acme-directory", "", "ACME directory URL, e.g. https://acme-v02.api.letsencrypt.org/directory")
	f.StringVar(&cfg.ACMEEmail, "acme-email", "", "contact e-mail for the ACME account")
	f.StringVar(&cfg.ACMECAFile, "acme-ca-file", "", "PEM bundle to trust for the ACME directory, besides the system roots (private ACME CAs such as step-ca)")
	f.DurationVar(&cfg.TLSTicketRotation, "tls-ticket-key-rotation", certs.DefaultTicketRotation, "public HTTPS: how long one session ticket key encrypts new tickets; every node of a cluster shares the keys through the store")
	f.IntVar(&cfg.TLSTicketKeysKept, "tls-ticket-keys-kept", certs.DefaultTicketKeysKept, "public HTTPS: rotation periods a ticket key still decrypts after it stopped encrypting (tickets resume for this many periods at least, one more at most)")
	f.StringVar(&gatewayAddrs, "gateway-addresses", "", "addresses of this host handed out one per Gateway whose HTTP listener has no hostname, first-last or comma-separated (e.g. 203.0.113.10-203.0.113.20): each serves HTTP on --gateway-http-port and routes every request to its Gateway, whatever the Host")
	f.IntVar(&cfg.GatewayHTTPPort, "gateway-http-port", server.DefaultGatewayHTTPPort, "port the --gateway-addresses serve HTTP on")
	f.IntVar(&cfg.GatewayHTTPSPort, "gateway-https-port", server.DefaultGatewayHTTPSPort, "port the --gateway-addresses serve HTTPS on (with --https-listen), each with the certificate its holder uploaded, whatever name the client sends")
	f.BoolVar(&cfg.AnyHost, "any-host", false, "let tunnel keys name any host, not only subdomains of --base-domain and reserved custom domains: the first owner to publish a host claims it (for an edge whose admin lets its users publish names they point at it)")
	f.IntVar(&cfg.TLSCertCacheSize, "tls-cert-cache-size", certs.DefaultCacheSize, "public HTTPS: certificates each node keeps in memory; the others stay in the store (shared by a cluster) and load on their next handshake")
	f.StringVar(&cfg.AccessIdPCAFile, "access-idp-ca-file", "", "PEM bundle to trust for the identity providers of access policies, besides the system roots")
	f.DurationVar(&cfg.AccessIdPRecheck, "access-idp-recheck", access.DefaultIdPRecheck, "how long an identity provider's discovery is trusted before a login checks it again (the check that fails new logins closed with a clear page when the provider is down)")
	f.StringVar(&portRange, "tcp-port-range", fmt.Sprintf("%d-%d", server.DefaultTCPPortRange[0], server.DefaultTCPPortRange[1]), "ports handed to TCP endpoints, first-last")
	f.StringVar(&cfg.TCPListenHost, "tcp-listen-host", server.DefaultTCPListenHost, "address TCP endpoints listen on")
	f.StringVar(&cfg.PublicTCPHost, "public-tcp-host", "", "host published in tcp:// URLs (default: the base domain)")
	f.StringVar(&cfg.DNSResolver, "dns-resolver", "system", `DNS server (host:port) for custom-domain checks; "system" for the OS resolver, empty disables`)
	f.StringVar(&cfg.CNAMETarget, "cname-target", "", "what custom domains must CNAME to (default: the base domain)")
	f.DurationVar(&cfg.KeepaliveInterval, "keepalive-interval", server.DefaultKeepaliveInterval, "SSH keepalive interval")
	f.DurationVar(&cfg.KeepaliveTimeout, "keepalive-timeout", server.DefaultKeepaliveTimeout, "drop a session whose keepalive is unanswered this long")
	f.DurationVar(&cfg.TunnelKeyTTL, "tunnel-key-ttl", server.DefaultTunnelKeyTTL, "lifetime of a tunnel key from its creation or last renewal (-1s: keys never expire)")
	f.BoolVar(&edgeH2, "edge-h2", true, "serve the public HTTPS listener's HTTP/2 connections with the edge's own HTTP/2 server (frames written inline, one write per batch of answers); --edge-h2=false serves them with net/http's instead")
	f.BoolVar(&cfg.NoHTTPRelay, "no-http-relay", false, "serve every public HTTP request with net/http, not plain HTTP/1.1 requests through the relay that parses each head once")
	f.BoolVar(&cfg.NoStreams, "no-streams", false, "carry TCP endpoints' connections on SSH channels only, not on stream connections that agents dial to the SSH port")
	f.IntVar(&cfg.MaxHandshakes, "max-handshakes", server.DefaultMaxHandshakes, "SSH connections still logging in; more are closed at once (-1: no limit)")
	f.IntVar(&cfg.MaxSessionsPerKey, "max-sessions-per-key", server.DefaultMaxSessionsPerKey, "live sessions of one tunnels:connect API key (-1: no limit)")
	f.IntVar(&cfg.MaxSessionsPerTunnelKey, "max-sessions-per-tunnel-key", server.DefaultMaxSessionsPerTunnelKey, "default session pool of a tunnel key: agent replicas serving its address at once (1-64; a key's max_sessions overrides it)")
	f.IntVar(&cfg.MaxBindsPerSession, "max-binds-per-session", server.DefaultMaxBindsPerSession, "addresses one session may bind (-1: no limit)")
	f.IntVar(&cfg.MaxChannelsPerSession, "max-channels-per-session", server.DefaultMaxChannelsPerSession, "open forward channels of one session (-1: no limit)")
	f.IntVar(&cfg.MaxConnectionsPerTunnel, "max-connections-per-tunnel", server.DefaultMaxConnectionsPerTunnel, "concurrent public connections of one TCP endpoint, requests in flight to one HTTP host (-1: no limit)")
	f.IntVar(&cfg.MaxSecrets, "max-secrets", server.DefaultMaxSecrets, "secrets the edge stores; a new one beyond is refused with 409 limit_exceeded (-1: no limit)")
	f.StringVar(&cfg.SecretsKeyFile, "secrets-key-file", "", "file of secrets encryption keys, base64 of 32 bytes, one per line; the first encrypts, the others only decrypt (default: <data-dir>/secrets.key, generated on first start)")
	f.StringSliceVar(&cfg.SecretsKeys, "secrets-key", nil, "secrets encryption keys, comma-separated, as in --secrets-key-file; set TUNA_EDGE_SECRETS_KEY rather than this flag, which other users see in the process list")
	etcdFlags(f, &cfg.Etcd)
	f.StringVar(&cfg.NodeName, "node-name", "", "this node's name in a cluster (default: the host name)")
	f.DurationVar(&cfg.NodeTTL, "node-ttl", server.DefaultNodeTTL, "lease of this node's record in a cluster: a dead node leaves GET /v1/nodes this long after its last renewal")
	f.StringVar(&cfg.APIAdvertiseURL, "api-advertise-url", "", "this node's API URL as GET /v1/nodes lists it (default: the listen address)")
	f.StringVar(&cfg.MetricsListen, "metrics-listen", "", "extra listen address for /metrics (it is also on the API listener)")
	f.StringVar(&pprofAddr, "pprof-addr", "", "serve Go's CPU and heap profiles (/debug/pprof/) on this loopback address, e.g. 127.0.0.1:6060 (off by default)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&logFormat, "log-format", "text", "text or json")
	f.StringVar(&bootstrap, "bootstrap-key-file", "", "on first start, create a full-access API key and write it to this file (0600); skipped when the file exists")
	return cmd
}

func parseRange(s string) ([2]int, error) {
	a, b, ok := strings.Cut(s, "-")
	first, err1 := strconv.Atoi(strings.TrimSpace(a))
	last, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil {
		return [2]int{}, fmt.Errorf("--tcp-port-range %q: want first-last, e.g. 20000-20999", s)
	}
	return [2]int{first, last}, nil
}

func newLogger(level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// bootstrapKey gives a fresh install its first admin key without a separate
// offline step (useful in containers).
func bootstrapKey(e *server.Edge, path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	secret, err := e.CreateAPIKey("bootstrap", []string{"full"})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("bootstrap key: %w", err)
	}
	// Whole or not at all: a file cut short by a crash would be taken for
	// the key at the next start, and the first admin key would be lost.
	if err := atomicfile.Create(path, []byte(secret+"\n"), 0o600); err != nil {
		return fmt.Errorf("bootstrap key: writing %s: %w", path, err)
	}
	return nil
}
