// Package desync tries the HTTP data plane as an attacker would: raw,
// malformed and adversarial messages from a client (and from a backend)
// through the real edge and the agent's real tunnel code, against a
// backend that records every byte it gets (tests/rawhttp.Recorder). It
// needs no control plane: the edge runs in this process on loopback, and
// the agent's session and proxy are the ones the agent runs for an http
// Tunnel.
package desync

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/proxy"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/session"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/rawhttp"
	"code.tuna.am/tuna/k8s-operator/tests/testca"
)

// host is the tunnel's public host.
const host = "desync." + harness.BaseDomain

// stack is an edge, one tunnel of one agent replica, and its backend.
type stack struct {
	edge    *harness.Edge
	backend *rawhttp.Recorder
	tunnel  *session.Tunnel
	// tls, when set, is how clients reach the edge's HTTPS listener;
	// nil: its plain HTTP listener.
	tls *tls.Config
}

// options of a stack.
type options struct {
	// netHTTP serves plain HTTP with net/http at both ends
	// (--no-http-relay at the edge, Traffic.NoRelay at the agent).
	netHTTP bool
	// maxInFlight caps the host's requests in flight.
	maxInFlight int
	// upstream, if set, is the backend's address in place of the
	// recorder's.
	upstream string
	// https: clients come over TLS (HTTP/1.1) to the edge's HTTPS
	// listener, with a certificate of a test CA.
	https bool
	// readHeader bounds the edge's wait for a head, and its TLS
	// handshakes; 0: 1 s.
	readHeader time.Duration
	// netHTTPH2: net/http's HTTP/2 server serves h2 connections
	// (--edge-h2=false), not the edge's own.
	netHTTPH2 bool
}

func startStack(t *testing.T, o options) *stack {
	t.Helper()
	rec, err := rawhttp.NewRecorder("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rec.Close() })
	// As a backend does: the agent's pooled keep-alives (upgrades go
	// through its shared transport) end after a while.
	rec.SetIdleTimeout(time.Second)
	if o.readHeader == 0 {
		o.readHeader = time.Second
	}
	eo := harness.EdgeOptions{
		KeepaliveInterval: 500 * time.Millisecond, KeepaliveTimeout: 2 * time.Second,
		// Short, so that a connection waiting for bytes that never come
		// ends within a test's patience.
		Public:                  harness.PublicTimeouts{ReadHeader: o.readHeader, Idle: 2 * time.Second, Body: 2 * time.Second},
		NoHTTPRelay:             o.netHTTP,
		NetHTTPH2:               o.netHTTPH2,
		MaxConnectionsPerTunnel: o.maxInFlight,
	}
	var clientTLS *tls.Config
	if o.https {
		eo.TLSCertFile, eo.TLSKeyFile, clientTLS = testCert(t)
	}
	e, err := harness.StartEdge(context.Background(), t.TempDir(), eo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	tk, err := e.Client(e.OperatorKey).CreateTunnelKey(context.Background(), apiwire.CreateTunnelKey{Protocol: "http", Address: "desync",
		Owner: harness.TestClusterID + "/desync"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := session.Config{
		Edge: tunnelclient.Config{Addr: e.SSHAddr(), Key: tk.Key, HostKey: e.HostKey(),
			KeepaliveInterval: 500 * time.Millisecond, KeepaliveTimeout: 2 * time.Second},
		Bind: protocol.BindRequest{Protocol: "http"},
	}
	upstream := rec.Addr()
	if o.upstream != "" {
		upstream = o.upstream
	}
	handler := proxy.NewHTTP(proxy.Upstream{Scheme: "http", Addr: upstream, Display: "backend"}, nil)
	tun := session.Start(cfg, session.Traffic{Handler: handler, NoRelay: o.netHTTP},
		session.Backoff{Initial: 50 * time.Millisecond, Max: time.Second}, session.Hooks{}, logr.Discard(), nil)
	t.Cleanup(tun.Stop)
	s := &stack{edge: e, backend: rec, tunnel: tun, tls: clientTLS}
	s.waitFor(t, "the tunnel to connect", func() bool { return tun.State().Phase == session.PhaseConnected })
	return s
}

// testCert writes a certificate for the tunnel's host, issued by a test
// CA, and returns its files and a client config that trusts the CA and
// offers HTTP/1.1 only.
func testCert(t *testing.T) (certFile, keyFile string, client *tls.Config) {
	t.Helper()
	ca, err := testca.New("desync test CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue(host)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := testca.PEMFiles(cert)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, &tls.Config{RootCAs: ca.Pool(), ServerName: host, NextProtos: []string{"http/1.1"}}
}

// scheme is the one clients use.
func (s *stack) scheme() string {
	if s.tls != nil {
		return "https"
	}
	return "http"
}

// dial opens a client connection to the edge's public listener: TLS on
// the HTTPS one when the stack has it.
func (s *stack) dial() (net.Conn, error) {
	if s.tls == nil {
		return net.Dial("tcp", s.edge.HTTPAddr())
	}
	return tls.Dial("tcp", s.edge.HTTPSAddr(), s.tls)
}

// waitFor awaits cond for 15 s.
func (s *stack) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// gauge reads one of the edge's gauges from its metrics.
func (s *stack) gauge(t *testing.T, name string) float64 {
	t.Helper()
	families, err := s.edge.Metrics().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("the edge exports no %s", name)
	return 0
}

// settled reports whether nothing is left behind: no request holds a
// tunnel's slot, no channel is open, the backend has no connection, and
// the process holds no more file descriptors than at rest.
func (s *stack) settled(t *testing.T, fds int) bool {
	return s.gauge(t, "tuna_edge_public_in_flight") == 0 && s.gauge(t, "tuna_edge_tunnel_channels") == 0 &&
		s.backend.Open() == 0 && openFiles(t) <= fds
}

// leftBehind describes what is left behind, for a failure message.
func (s *stack) leftBehind(t *testing.T, fds int) string {
	return fmt.Sprintf("requests in flight %v, channels %v, backend connections %d, file descriptors %d (at rest %d)",
		s.gauge(t, "tuna_edge_public_in_flight"), s.gauge(t, "tuna_edge_tunnel_channels"), s.backend.Open(), openFiles(t), fds)
}

// openFiles counts this process's file descriptors (/proc/self/fd).
func openFiles(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// get sends one plain GET on a connection of its own and returns the
// status and body.
func (s *stack) get(path string) (int, string, error) {
	c, err := s.dial()
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, host); err != nil {
		return 0, "", err
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

// answerEcho answers every request with its target as the body, so a
// client can tell whose answer it got.
func answerEcho(req rawhttp.Request) string {
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(req.Target), req.Target)
}

var caseTarget = regexp.MustCompile(`^/c(\d+)/`)

// caseOf is the number of the case a target belongs to, or -1.
func caseOf(target string) int {
	m := caseTarget.FindStringSubmatch(target)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// checkRouted checks that every request the backend got was routed by
// the edge: the public host, the edge's forwarding fields and nobody
// else's, a target the client sent on a request line of its own, never a
// smuggled one, and never twice.
func checkRouted(t *testing.T, reqs []rawhttp.Request, scheme string) {
	t.Helper()
	seen := map[string]int{}
	for _, r := range reqs {
		bad := func(why string) {
			t.Errorf("the backend got a request the edge did not route (%s): %s %s Host %q %v", why, r.Method, r.Target, r.Host, r.Header)
		}
		switch {
		case strings.Contains(r.Target, "smuggled"):
			bad("smuggled in another request's body")
		case r.Host != host:
			bad("foreign Host")
		case strings.Join(r.Header.Values("X-Forwarded-For"), ",") != "127.0.0.1":
			bad("X-Forwarded-For not the edge's")
		case strings.Join(r.Header.Values("X-Forwarded-Host"), ",") != host:
			bad("X-Forwarded-Host not the edge's")
		case strings.Join(r.Header.Values("X-Forwarded-Proto"), ",") != scheme:
			bad("X-Forwarded-Proto not the edge's")
		case r.Header.Get("Forwarded") != "":
			bad("a client's Forwarded field")
		case caseOf(r.Target) < 0 && !strings.HasPrefix(r.Target, "/visitor/") && r.Target != "/warm-up":
			bad("a target no client sent")
		}
		if seen[r.Target]++; seen[r.Target] == 2 {
			t.Errorf("the backend ran %s %s twice", r.Method, r.Target)
		}
	}
}
