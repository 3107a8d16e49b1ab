package harness

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	edgeclient "code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// tcpPorts is the size of a test edge's TCP port range.
const tcpPorts = 50

// BaseDomain is the edge's base domain in tests and the demo: curl resolves
// *.localhost to loopback by itself, so printed URLs work as they are.
const BaseDomain = "tuna.localhost"

// Edge is a tuna-edge running in this process on loopback.
type Edge struct {
	*server.Edge
	DataDir string
	// OperatorKey is an API key with tunnels:write, bound to the test
	// operator's cluster id (TestClusterID), as the chart's credentials
	// hold it on a shared edge.
	OperatorKey string
	// AdminKey has full access, for tests that act as the account owner.
	AdminKey string
	// Options are the options it started with, every address filled in:
	// start another edge with them (and the same data dir) to restart it.
	Options EdgeOptions
}

// EdgeOptions tune a test edge; zero values are fine.
type EdgeOptions struct {
	// HTTPListen is the public HTTP listener.
	HTTPListen string
	// TLSCertFile and TLSKeyFile, when set, add a public HTTPS listener
	// (HTTPSListen, a port of its own when empty) with that certificate;
	// tunnels are then published on https:// URLs.
	TLSCertFile, TLSKeyFile string
	HTTPSListen             string
	// Keepalive tunes the transport for fast failure detection in tests.
	KeepaliveInterval, KeepaliveTimeout time.Duration
	// APIListen and SSHListen are the control API's and the SSH
	// transport's addresses.
	APIListen, SSHListen string
	// TCPPortRange is what TCP endpoints get (50 ports by default).
	TCPPortRange [2]int
	// DNSResolver verifies custom domains (a dnstest server in tests).
	DNSResolver string
	// TunnelKeyTTL, when set, is the tunnel keys' lifetime (default 24h):
	// a few seconds make the controller's renewals observable.
	TunnelKeyTTL time.Duration
	// APIRateLimit and APIRateBurst override the edge's per-key API rate
	// (default: what ships, 20/s with bursts of 40).
	APIRateLimit float64
	APIRateBurst int
	// Public are the public listeners' timeouts (the edge's defaults
	// where zero); NoHTTPRelay serves plain HTTP with net/http, as
	// --no-http-relay does.
	Public      PublicTimeouts
	NoHTTPRelay bool
	// NetHTTPH2 serves the HTTPS listener's h2 connections with
	// net/http's HTTP/2 server, as --edge-h2=false does (by default the
	// edge's own serves them).
	NetHTTPH2 bool
	// MaxConnectionsPerTunnel caps each host's requests in flight
	// (default: what ships).
	MaxConnectionsPerTunnel int
	// GatewayAddresses are the edge's Gateway addresses (loopback
	// addresses of the test's own), served HTTP on GatewayHTTPPort and,
	// with HTTPS, HTTPS on GatewayHTTPSPort.
	GatewayAddresses                  []netip.Addr
	GatewayHTTPPort, GatewayHTTPSPort int
	// Logger receives the edge's log (none: it is dropped).
	Logger *slog.Logger
}

// PublicTimeouts are the public listeners' timeouts (server.Config's
// Public*Timeout fields).
type PublicTimeouts struct {
	ReadHeader, Idle, Read, Write, Body, Exchange time.Duration
}

// StartEdge starts an edge with its state in dataDir. Starting another edge
// on the same dataDir models a restart: keys and reservations survive.
func StartEdge(ctx context.Context, dataDir string, o EdgeOptions) (*Edge, error) {
	// Addresses left empty come from this process's own block of ports,
	// never from the ephemeral range: another process's outbound
	// connection could take an ephemeral port between a restart's close
	// and listen, or a TCP endpoint's port before the edge binds it.
	addrs := []*string{&o.APIListen, &o.SSHListen, &o.HTTPListen}
	if o.TLSCertFile != "" {
		addrs = append(addrs, &o.HTTPSListen)
	}
	for _, addr := range addrs {
		if *addr != "" {
			continue
		}
		a, err := ports.TakeAddr()
		if err != nil {
			return nil, err
		}
		*addr = a
	}
	if o.TCPPortRange == [2]int{} {
		first, err := ports.Take(tcpPorts)
		if err != nil {
			return nil, err
		}
		o.TCPPortRange = [2]int{first, first + tcpPorts - 1}
	}
	cfg := server.Config{
		DataDir:           dataDir,
		BaseDomain:        BaseDomain,
		APIListen:         o.APIListen,
		SSHListen:         o.SSHListen,
		HTTPListen:        o.HTTPListen,
		HTTPSListen:       o.HTTPSListen,
		TLSCertFile:       o.TLSCertFile,
		TLSKeyFile:        o.TLSKeyFile,
		TCPListenHost:     "127.0.0.1",
		PublicTCPHost:     "127.0.0.1",
		TCPPortRange:      o.TCPPortRange,
		KeepaliveInterval: o.KeepaliveInterval,
		KeepaliveTimeout:  o.KeepaliveTimeout,
		DNSResolver:       o.DNSResolver,
		TunnelKeyTTL:      o.TunnelKeyTTL,
		APIRateLimit:      o.APIRateLimit,
		APIRateBurst:      o.APIRateBurst,

		PublicReadHeaderTimeout: o.Public.ReadHeader,
		PublicIdleTimeout:       o.Public.Idle,
		PublicReadTimeout:       o.Public.Read,
		PublicWriteTimeout:      o.Public.Write,
		PublicBodyTimeout:       o.Public.Body,
		PublicExchangeTimeout:   o.Public.Exchange,
		NoHTTPRelay:             o.NoHTTPRelay,
		NetHTTPH2:               o.NetHTTPH2,
		MaxConnectionsPerTunnel: o.MaxConnectionsPerTunnel,
		GatewayAddresses:        o.GatewayAddresses,
		GatewayHTTPPort:         o.GatewayHTTPPort,
		GatewayHTTPSPort:        o.GatewayHTTPSPort,
		Logger:                  o.Logger,
	}
	e, err := server.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating edge: %w", err)
	}
	if err := e.Start(ctx); err != nil {
		return nil, fmt.Errorf("starting edge: %w", err)
	}
	edge := &Edge{Edge: e, DataDir: dataDir, Options: o}
	// The operator's key as the docs advise with SecretSync on: tunnels and
	// reading secrets, never writing them; bound to the cluster id, as on
	// an edge that several clusters share.
	if edge.OperatorKey, err = e.CreateBoundAPIKey("tuna-operator", []string{apiwire.ScopeWrite, apiwire.ScopeSecretsRead},
		TestClusterID); err != nil {
		return nil, err
	}
	if edge.AdminKey, err = e.CreateAPIKey("admin", []string{apiwire.ScopeFull}); err != nil {
		return nil, err
	}
	return edge, nil
}

// Client returns an API client with the given key. It pins the API's
// certificate, as the operator and the CLI are configured to.
func (e *Edge) Client(key string) *edgeclient.Client {
	return edgeclient.New(e.APIURL(), key, edgeclient.WithTrust(e.Trust()))
}

// Trust pins the API's certificate (generated in the data dir, so it is the
// same after a restart on that dir).
func (e *Edge) Trust() edgeclient.Trust { return edgeclient.Trust{Fingerprint: e.APIFingerprint()} }

// PreferListen returns addr when it is free, else "" (which StartEdge
// fills with a port of this process's block): a memorable address when it
// can be had, never a failure when it is taken. addr "" is "".
func PreferListen(addr string) string {
	if addr == "" {
		return ""
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return ""
	}
	_ = ln.Close() // only a probe: nothing was accepted
	return addr
}

// APIRequests reads the edge's own counter of control API calls
// (tuna_edge_api_requests_total): the answers it gave, by route pattern
// and status code.
func (e *Edge) APIRequests() (map[string]map[int]int, error) {
	families, err := e.Metrics().Registry().Gather()
	if err != nil {
		return nil, err
	}
	for _, f := range families {
		if f.GetName() == "tuna_edge_api_requests_total" {
			return apiRequestCounts(f), nil
		}
	}
	return map[string]map[int]int{}, nil
}

// apiRequestCounts reads the family tuna_edge_api_requests_total (nil:
// none yet) by route and code.
func apiRequestCounts(f *dto.MetricFamily) map[string]map[int]int {
	out := map[string]map[int]int{}
	for _, m := range f.GetMetric() {
		var route string
		var code int
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "route":
				route = l.GetValue()
			case "code":
				code, _ = strconv.Atoi(l.GetValue())
			}
		}
		if out[route] == nil {
			out[route] = map[int]int{}
		}
		out[route][code] += int(m.GetCounter().GetValue())
	}
	return out
}

// Sum adds up the calls of counts (APIRequests) whose route and code
// pass keep.
func Sum(counts map[string]map[int]int, keep func(route string, code int) bool) int {
	n := 0
	for route, codes := range counts {
		for code, c := range codes {
			if keep(route, code) {
				n += c
			}
		}
	}
	return n
}
