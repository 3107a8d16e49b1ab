package harness

import (
	"context"
	"fmt"
	"net"
	"time"

	edgeclient "code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/edge/server"
)

// BaseDomain is the edge's base domain in tests and the demo: curl resolves
// *.localhost to loopback by itself, so printed URLs work as they are.
const BaseDomain = "tuna.localhost"

// Edge is a tuna-edge running in this process on loopback.
type Edge struct {
	*server.Edge
	DataDir string
	// OperatorKey is an API key with tunnels:write, as the chart's
	// credentials would hold.
	OperatorKey string
	// AdminKey has full access, for tests that act as the account owner.
	AdminKey string
}

// EdgeOptions tune a test edge; zero values are fine.
type EdgeOptions struct {
	// HTTPListen is the public HTTP listener; default 127.0.0.1:0.
	HTTPListen string
	// Keepalive tunes the transport for fast failure detection in tests.
	KeepaliveInterval, KeepaliveTimeout time.Duration
	// Reuse the listen addresses of a previous edge (restart tests).
	APIListen, SSHListen string
	// DNSResolver verifies custom domains (a dnstest server in tests).
	DNSResolver string
	// APIRateLimit and APIRateBurst override the edge's per-key API rate
	// (default: what ships, 20/s with bursts of 40).
	APIRateLimit float64
	APIRateBurst int
}

// StartEdge starts an edge with its state in dataDir. Starting another edge
// on the same dataDir models a restart: keys and reservations survive.
func StartEdge(ctx context.Context, dataDir string, o EdgeOptions) (*Edge, error) {
	base := freePortBase()
	cfg := server.Config{
		DataDir:           dataDir,
		BaseDomain:        BaseDomain,
		APIListen:         orLoopback(o.APIListen),
		SSHListen:         orLoopback(o.SSHListen),
		HTTPListen:        orLoopback(o.HTTPListen),
		TCPListenHost:     "127.0.0.1",
		PublicTCPHost:     "127.0.0.1",
		TCPPortRange:      [2]int{base, base + 49},
		KeepaliveInterval: o.KeepaliveInterval,
		KeepaliveTimeout:  o.KeepaliveTimeout,
		DNSResolver:       o.DNSResolver,
		APIRateLimit:      o.APIRateLimit,
		APIRateBurst:      o.APIRateBurst,
	}
	e, err := server.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating edge: %w", err)
	}
	if err := e.Start(ctx); err != nil {
		return nil, fmt.Errorf("starting edge: %w", err)
	}
	edge := &Edge{Edge: e, DataDir: dataDir}
	if edge.OperatorKey, err = e.CreateAPIKey("tuna-operator", []string{edgeclient.ScopeWrite}); err != nil {
		return nil, err
	}
	if edge.AdminKey, err = e.CreateAPIKey("admin", []string{edgeclient.ScopeFull}); err != nil {
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

func orLoopback(addr string) string {
	if addr == "" {
		return "127.0.0.1:0"
	}
	return addr
}

// freePortBase finds the start of a run of 50 free-looking ports for the
// edge's TCP endpoints, so parallel test processes do not collide.
func freePortBase() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 40000
	}
	defer ln.Close()
	p := ln.Addr().(*net.TCPAddr).Port
	if p > 65000 {
		p = 40000
	}
	return p
}
