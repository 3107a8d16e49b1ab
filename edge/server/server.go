package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/internal/third_party/xcrypto/ssh"
	"golang.org/x/time/rate"

	"code.tuna.am/tuna/k8s-operator/edge/internal/access"
	"code.tuna.am/tuna/k8s-operator/edge/internal/api"
	"code.tuna.am/tuna/k8s-operator/edge/internal/certs"
	"code.tuna.am/tuna/k8s-operator/edge/internal/dnsverify"
	"code.tuna.am/tuna/k8s-operator/edge/internal/h2serve"
	"code.tuna.am/tuna/k8s-operator/edge/internal/public"
	"code.tuna.am/tuna/k8s-operator/edge/internal/registry"
	"code.tuna.am/tuna/k8s-operator/edge/internal/secrets"
	"code.tuna.am/tuna/k8s-operator/edge/internal/sshd"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
	"code.tuna.am/tuna/k8s-operator/edge/internal/streamhub"
	"code.tuna.am/tuna/k8s-operator/edge/internal/tcpports"
	"code.tuna.am/tuna/k8s-operator/edge/metrics"
	"code.tuna.am/tuna/k8s-operator/internal/accept"
)

// Edge is a running (or ready to run) tuna-edge.
type Edge struct {
	cfg     Config
	log     *slog.Logger
	st      *store.Store
	reg     *registry.Registry
	ports   *tcpports.Manager
	m       *metrics.Metrics
	hostKey ssh.Signer
	ssh     *sshd.Server
	api     *api.Server
	secrets *secrets.Manager
	access  *access.Keeper
	public  *public.Handler
	// certs serves the HTTPS listener's certificates (nil without it).
	certs *certs.Manager
	// ring is the secrets keyring: it seals the HTTPS listener's shared
	// secrets (edge/internal/certs) and the access records too.
	ring *secrets.Keyring
	// tickets are the session ticket keys shared through the store.
	tickets *certs.Tickets
	// stopTLS ends the ticket key sync (and certificate upkeep) on Close.
	stopTLS context.CancelFunc
	// stopExpiry ends the expired-key sweep on Close.
	stopExpiry context.CancelFunc
	// apiTLS is the API's certificate; nil with InsecureHTTPAPI.
	apiTLS *apiTLS
	// follow applies other nodes' changes (nil for a single edge); member
	// keeps this node's record in the cluster.
	follow    *follower
	member    *store.Membership
	startedAt time.Time
	// health records listeners that stopped accepting for good.
	health listenerHealth

	mu        sync.Mutex
	started   bool
	closed    bool
	servers   []publicServer
	apiURL    string
	sshAddr   string
	httpAddr  string
	httpsAddr string
	wg        sync.WaitGroup
}

// New opens the store and the SSH host key (creating it on first run,
// moving it out of an old database) and builds the edge's parts. Nothing
// listens until Start.
func New(cfg Config) (*Edge, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	m := metrics.New()
	st, err := openStore(&cfg, m)
	if err != nil {
		return nil, err
	}
	signer, err := loadHostKey(st, cfg.HostKeyFile, cfg.Logger)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	e := &Edge{cfg: cfg, log: cfg.Logger, st: st, reg: registry.New(), m: m, hostKey: signer,
		ports: tcpports.New(cfg.TCPListenHost, cfg.TCPPortRange[0], cfg.TCPPortRange[1], cfg.Logger)}
	e.ports.OnFail = func(port int, err error) { e.health.fail(fmt.Sprintf("TCP endpoint port %d", port), err) }
	e.reg.UseDomainPolicies(func(host string) string { return st.Host(host).AccessPolicy })
	if st.Shared() {
		if err := e.checkIdentity(); err != nil {
			_ = st.Close()
			return nil, err
		}
	}
	if err := e.alignExpiries(); err != nil {
		_ = st.Close()
		return nil, err
	}
	var resealed int
	if e.secrets, resealed, err = e.openSecrets(); err != nil {
		_ = st.Close()
		return nil, err
	}
	if e.access, err = e.openAccess(); err != nil {
		_ = st.Close()
		return nil, err
	}
	if err := e.logKeyUse(resealed); err != nil {
		_ = st.Close()
		return nil, err
	}
	if !cfg.InsecureHTTPAPI {
		if e.apiTLS, err = loadAPITLS(&cfg, time.Now(), cfg.Logger); err != nil {
			_ = st.Close()
			return nil, err
		}
	}
	var hub *streamhub.Hub
	if !cfg.NoStreams {
		if hub, err = streamhub.NewHub(); err != nil {
			_ = st.Close()
			return nil, err
		}
	}
	e.ssh = sshd.New(sshd.Config{
		Access:            e.access.Engine(),
		Streams:           hub,
		HostKey:           signer,
		BaseDomain:        cfg.BaseDomain,
		Claimable:         func(host string) bool { return e.api.Claimable(host) },
		PublicURL:         e.publicURL,
		TCPListenHost:     cfg.TCPListenHost,
		PublicTCPHost:     cfg.PublicTCPHost,
		TCPPortFirst:      cfg.TCPPortRange[0],
		TCPPortLast:       cfg.TCPPortRange[1],
		Ports:             e.ports,
		KeepaliveInterval: cfg.KeepaliveInterval,
		KeepaliveTimeout:  cfg.KeepaliveTimeout,
		Limits: sshd.Limits{
			Handshakes:           cfg.MaxHandshakes,
			SessionsPerKey:       cfg.MaxSessionsPerKey,
			SessionsPerTunnelKey: cfg.MaxSessionsPerTunnelKey,
			BindsPerSession:      cfg.MaxBindsPerSession,
			ChannelsPerSession:   cfg.MaxChannelsPerSession,
			ConnectionsPerTunnel: cfg.MaxConnectionsPerTunnel,
		},
		Logger: cfg.Logger,
	}, st, e.reg, e.m)
	var ownCerts api.Certificates
	if cfg.HTTPSListen != "" {
		if e.certs, err = e.newCertManager(); err != nil {
			_ = st.Close()
			return nil, err
		}
		ownCerts = e.certs
	}
	e.api = api.New(api.Config{
		DefaultPoolSize:  cfg.MaxSessionsPerTunnelKey,
		BaseDomain:       cfg.BaseDomain,
		CNAMETarget:      cfg.CNAMETarget,
		TCPPortFirst:     cfg.TCPPortRange[0],
		TCPPortLast:      cfg.TCPPortRange[1],
		PublicTCPHost:    cfg.PublicTCPHost,
		GatewayAddresses: cfg.GatewayAddresses,
		AnyHost:          cfg.AnyHost,
		Ports:            e.ports,
		EdgeInfo:         e.Info,
		Nodes:            e.Nodes,
		Verifier:         dnsverify.New(cfg.DNSResolver),
		TunnelKeyTTL:     max(cfg.TunnelKeyTTL, 0),
		Logger:           cfg.Logger,
		RateLimit:        rate.Limit(cfg.APIRateLimit),
		RateBurst:        cfg.APIRateBurst,
		Secrets:          e.secrets,
		Access:           e.access,
		Certificates:     ownCerts,
	}, st, e.reg, e.m)
	e.public = public.New(e.reg, e.knownHost, public.Timeouts{
		ReadHeader: cfg.PublicReadHeaderTimeout,
		Idle:       cfg.PublicIdleTimeout,
		Read:       cfg.PublicReadTimeout,
		Write:      cfg.PublicWriteTimeout,
		Body:       cfg.PublicBodyTimeout,
		Exchange:   cfg.PublicExchangeTimeout,
	}, e.m, cfg.MaxConnectionsPerTunnel, cfg.Logger)
	e.public.UseAccess(e.access.Engine())
	return e, nil
}

// httpClientTrusting is an HTTP client that trusts the CAs in file besides
// the system's roots.
func httpClientTrusting(file string) (*http.Client, error) {
	pemBytes, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("config: reading ACMECAFile: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("config: ACMECAFile %s holds no PEM certificate", file)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}, nil
}

// Start opens every listener and serves in the background. ctx bounds
// start-up only; call Close to stop the edge.
func (e *Edge) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started || e.closed {
		return errors.New("edge: Start called twice or after Close")
	}
	e.started = true
	if err := e.start(ctx); err != nil {
		e.mu.Unlock()
		_ = e.Close()
		e.mu.Lock()
		return err
	}
	return nil
}

func (e *Edge) start(ctx context.Context) error {
	var lc net.ListenConfig
	listen := func(what, addr string) (net.Listener, error) {
		ln, err := lc.Listen(ctx, "tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("edge: %s listener on %s: %w", what, addr, err)
		}
		return ln, nil
	}

	if e.st.Shared() {
		// Before the ports are held: an endpoint another node reserves
		// meanwhile then arrives as a change.
		e.follow = e.startFollower()
	}
	e.holdReservedPorts()
	if e.cfg.TunnelKeyTTL > 0 {
		sweep, stop := context.WithCancel(context.Background())
		e.stopExpiry = stop
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			e.expireSessions(sweep)
		}()
	}

	sshLn, err := listen("SSH", e.cfg.SSHListen)
	if err != nil {
		return err
	}
	e.sshAddr = sshLn.Addr().String()
	e.goServe("ssh", func() error { return e.ssh.Serve(sshLn) })

	if e.cfg.HTTPListen != "" {
		ln, err := listen("public HTTP", e.cfg.HTTPListen)
		if err != nil {
			return err
		}
		e.httpAddr = ln.Addr().String()
		srv := e.public.Server("http")
		if e.certs != nil && e.acmeOn() {
			// HTTP-01 challenges arrive here, on any node; everything
			// else is routed.
			srv.Handler = e.certs.HTTPHandler(e.public)
		}
		if e.cfg.NoHTTPRelay {
			e.serveHTTP("public HTTP", srv, ln, false)
		} else {
			relay := e.public.Relay(srv)
			relay.OnAcceptRetry = e.retrying("public HTTP")
			e.servers = append(e.servers, relay)
			e.goServe("public HTTP", func() error { return relay.Serve(ln) })
		}
	}

	for _, a := range e.cfg.GatewayAddresses {
		what := "Gateway address " + a.String()
		ln, err := listen(what, net.JoinHostPort(a.String(), strconv.Itoa(e.cfg.GatewayHTTPPort)))
		if err != nil {
			return err
		}
		e.serveHTTP(what, e.public.AddressServer("http", a.String()), ln, false)
	}

	if e.cfg.HTTPSListen != "" {
		tlsCfg, err := e.publicTLS()
		if err != nil {
			return err
		}
		if err := e.serveGatewayHTTPS(listen, tlsCfg); err != nil {
			return err
		}
		ln, err := listen("public HTTPS", e.cfg.HTTPSListen)
		if err != nil {
			return err
		}
		e.httpsAddr = ln.Addr().String()
		srv := e.public.Server("https")
		srv.TLSConfig = tlsCfg
		if e.cfg.NoHTTPRelay {
			e.serveHTTP("public HTTPS", srv, ln, true)
		} else {
			var h2 *h2serve.Server
			if !e.cfg.NetHTTPH2 {
				h2 = e.public.H2("https")
			}
			relay := e.public.TLSRelay(srv, tlsCfg, h2)
			relay.OnAcceptRetry = e.retrying("public HTTPS")
			e.servers = append(e.servers, relay)
			if h2 != nil {
				// After the relay, which stops accepting first: then its
				// h2 connections get GOAWAY and finish their streams.
				e.servers = append(e.servers, h2)
			}
			e.goServe("public HTTPS", func() error { return relay.Serve(ln) })
		}
	}

	apiLn, err := listen("API", e.cfg.APIListen)
	if err != nil {
		return err
	}
	e.startAPI(apiLn)
	e.writeClientConfig()

	if e.cfg.MetricsListen != "" {
		ln, err := listen("metrics", e.cfg.MetricsListen)
		if err != nil {
			return err
		}
		m := http.NewServeMux()
		m.Handle("GET /metrics", e.m.Handler())
		e.serveHTTP("metrics", &http.Server{Handler: m, ReadHeaderTimeout: 30 * time.Second}, ln, false)
	}
	e.startedAt = time.Now().UTC()
	e.m.Nodes(1)
	if e.st.Shared() {
		if e.member, err = e.st.Join(e.nodeRecord(), e.cfg.NodeTTL); err != nil {
			return fmt.Errorf("edge: joining the cluster: %w", err)
		}
		e.pushNodes()
	}
	e.log.Info("tuna-edge started", "api", e.apiURL, "ssh", e.sshAddr, "http", e.httpAddr, "https", e.httpsAddr,
		"node", e.cfg.NodeName, "cluster", e.st.Shared())
	return nil
}

// holdReservedPorts listens on the port of every reserved TCP endpoint, so
// no other process can take it between sessions. A port that another
// process took while the edge was down stays reserved: binds to it are
// refused with a message that says so until the port is free again.
func (e *Edge) holdReservedPorts() {
	eps, err := e.st.ListTCPEndpoints()
	if err != nil {
		e.log.Error("listing TCP endpoints to listen on", "err", err)
		return
	}
	for _, ep := range eps {
		if err := e.ports.Hold(ep.Port); err != nil {
			e.log.Warn("cannot listen on a reserved TCP endpoint's port", "alias", ep.Alias, "port", ep.Port, "err", err)
		}
	}
}

func (e *Edge) goServe(what string, serve func() error) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.log.Error("listener stopped accepting for good; /healthz fails until the edge restarts", "listener", what, "err", err)
			e.health.fail(what, err)
		}
	}()
}

// retrying logs a transient accept error that a listener waits out.
func (e *Edge) retrying(what string) func(error, time.Duration) {
	return func(err error, wait time.Duration) {
		e.log.Warn("accepting a connection failed; retrying", "listener", what, "err", err, "retry_in", wait)
	}
}

// publicServer is a server Close shuts down: an http.Server, or the h1
// relay in front of one.
type publicServer interface {
	Shutdown(context.Context) error
	Close() error
}

// serveHTTP serves srv on ln; with TLS, ServeTLS adds "h2" to the ALPN
// protocols so TLS clients get HTTP/2.

func (e *Edge) serveHTTP(what string, srv *http.Server, ln net.Listener, useTLS bool) {
	e.servers = append(e.servers, srv)
	ln = accept.Wrap(ln, e.retrying(what))
	e.goServe(what, func() error {
		if useTLS {
			return srv.ServeTLS(ln, "", "")
		}
		return srv.Serve(ln)
	})
}
