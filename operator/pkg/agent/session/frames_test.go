package session

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/crypto/bcrypt"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/proxy"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
	"code.tuna.am/tuna/k8s-operator/tests/testca"
	"code.tuna.am/tuna/k8s-operator/tests/testedge"
)

// The two ways the edge carries an HTTP/2 stream to the agent: in frames
// (an agent that names protocol.FeatureHTTPFrames in its bind), and as
// HTTP/1.1 on a channel (an agent that does not: every agent before
// frames). The tests below run real clients through the real edge over
// both, and require the same answers.
var h2Paths = []struct {
	name   string
	frames Frames
	// proto is the protocol the agent's handler sees a stream in.
	proto int
}{{"frames", FramesOn, 2}, {"http1-channels", FramesOff, 1}}

// h2Edge is a real edge with its HTTPS listener on loopback, for a
// certificate of *.tuna.localhost from a test CA.
type h2Edge struct {
	e    *server.Edge
	api  *client.Client
	pool *x509.CertPool
}

// edgeH2Servers are the edge's two HTTP/2 servers for its HTTPS
// listener: the edge's own (the default) and net/http's
// (server.Config.NetHTTPH2, --edge-h2=false).
var edgeH2Servers = []struct {
	name    string
	netHTTP bool
}{{"edge-h2", false}, {"net-http-h2", true}}

// forEachEdgeH2 runs test against an edge with each HTTP/2 server.
func forEachEdgeH2(t *testing.T, test func(t *testing.T, h *h2Edge)) {
	for _, s := range edgeH2Servers {
		t.Run(s.name, func(t *testing.T) {
			test(t, startH2Edge(t, func(c *server.Config) { c.NetHTTPH2 = s.netHTTP }))
		})
	}
}

func startH2Edge(t testing.TB, opts ...func(*server.Config)) *h2Edge {
	t.Helper()
	ca, err := testca.New("tuna frames test CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue("*.tuna.localhost")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := testca.PEMFiles(cert)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testedge.Config(t, filepath.Join(dir, "data"))
	cfg.HTTPListen, cfg.HTTPSListen = "", ports.Addr(t)
	cfg.TLSCertFile, cfg.TLSKeyFile = certFile, keyFile
	for _, o := range opts {
		o(&cfg)
	}
	e := testedge.Start(t, cfg)
	api, _ := testedge.Client(t, e, "operator", apiwire.ScopeWrite)
	return &h2Edge{e: e, pool: ca.Pool(), api: api}
}

// protoSeen records the protocol of the requests the agent's handler
// takes, to tell which path a stream took.
type protoSeen struct {
	h     http.Handler
	major atomic.Int32
}

func (p *protoSeen) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.major.Store(int32(r.ProtoMajor))
	p.h.ServeHTTP(w, r)
}

// publish runs a tunnel for label.tuna.localhost to up, with frames or
// without, and returns its host and what its handler saw.
func (h *h2Edge) publish(t testing.TB, label string, up proxy.Upstream, frames Frames) (string, *protoSeen) {
	t.Helper()
	tk, err := h.api.CreateTunnelKey(context.Background(), apiwire.CreateTunnelKey{Protocol: "http", Address: label})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Edge: tunnelclient.Config{Addr: h.e.SSHAddr(), Key: tk.Key, HostKey: h.e.HostKey(),
			KeepaliveInterval: 500 * time.Millisecond, KeepaliveTimeout: 2 * time.Second},
		Bind: protocol.BindRequest{Protocol: "http"},
	}
	seen := &protoSeen{h: proxy.NewHTTP(up, nil)}
	tun := Start(cfg, Traffic{Handler: seen, Frames: frames}, DefaultBackoff, Hooks{}, logr.Discard(), nil)
	t.Cleanup(tun.Stop)
	waitConnectedB(t, tun)
	return label + ".tuna.localhost", seen
}

// client is an HTTP/2 client of the edge's HTTPS listener.
func (h *h2Edge) client(t testing.TB) *http.Client {
	t.Helper()
	p := &http.Protocols{}
	p.SetHTTP2(true)
	tr := &http.Transport{Protocols: p, TLSClientConfig: &tls.Config{RootCAs: h.pool, MinVersion: tls.VersionTLS12},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, h.e.HTTPSAddr())
		}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// serveBackend serves h with HTTP/1.1 on loopback and returns its address.
func serveBackend(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// headLines is what a backend got, one "Name: value" per line, sorted,
// with the tunnel's host replaced by HOST, so that two paths compare.
func headLines(r *http.Request, host string) string {
	var lines []string
	for name, vv := range r.Header {
		for _, v := range vv {
			lines = append(lines, name+": "+strings.ReplaceAll(v, host, "HOST"))
		}
	}
	slices.Sort(lines)
	return fmt.Sprintf("%s %s %s\n%s", r.Method, strings.ReplaceAll(r.Host, host, "HOST"), r.RequestURI, strings.Join(lines, "\n"))
}

// Over both paths, a request reaches the backend with the same fields:
// the edge's forwarding fields in place of the client's, no identity
// field a client sent (only an access policy's login writes them), the
// client's own fields; a body and its trailer cross, and so do the
// answer's fields, body and trailers. The agent's handler takes the
// stream as HTTP/2 in frames, as HTTP/1.1 on channels.
func TestH2StreamsInFramesAsOnHTTP1Channels(t *testing.T) {
	forEachEdgeH2(t, func(t *testing.T, h *h2Edge) {
		heads := make(chan string, 1)
		peers := make(chan string, 2)
		var current atomic.Pointer[string]
		backend := serveBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			peers <- r.RemoteAddr
			heads <- headLines(r, *current.Load()) + "\nbody: " + string(body) + "\ntrailer: " + r.Trailer.Get("X-Sum")
			w.Header().Set("Trailer", "X-Echoed")
			w.Header().Set("X-Answer", "yes")
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, "answer to "+string(body))
			w.Header().Set("X-Echoed", "declared")
			w.Header().Set(http.TrailerPrefix+"X-Late", "undeclared")
		}))
		got := map[string]string{}
		for _, p := range h2Paths {
			host, seen := h.publish(t, "fields-"+p.name, proxy.Upstream{Scheme: "http", Addr: backend, Display: "backend"}, p.frames)
			current.Store(&host)
			c := h.client(t)
			for range 2 { // the second goes on a channel kept from the first
				req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "https://"+host+"/p?i=1", io.NopCloser(strings.NewReader("hello")))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("X-Tuna-User", "admin@example.com")
				req.Header.Set("X-Tuna-Groups", "admins")
				req.Header.Set("X-Forwarded-For", "192.0.2.66")
				req.Header.Set("X-Forwarded-Host", "evil.example")
				req.Header.Set("Forwarded", "for=192.0.2.66")
				req.Header.Set("X-Client", "kept")
				// A body of no declared length: trailers need one (HTTP/1.1
				// carries them in a chunked body only).
				req.Trailer = http.Header{"X-Sum": {"5"}}
				res, err := c.Do(req)
				if err != nil {
					t.Fatalf("%s: %v", p.name, err)
				}
				body, _ := io.ReadAll(res.Body)
				_ = res.Body.Close()
				answer := fmt.Sprintf("%d %s %q %s %s", res.StatusCode, res.Header.Get("X-Answer"), body, res.Trailer.Get("X-Echoed"), res.Trailer.Get("X-Late"))
				if want := `202 yes "answer to hello" declared undeclared`; res.ProtoMajor != 2 || answer != want {
					t.Fatalf("%s: answer %s over %s, want %s", p.name, answer, res.Proto, want)
				}
				got[p.name] = <-heads
			}
			if int(seen.major.Load()) != p.proto {
				t.Fatalf("%s: the agent's handler took the stream as HTTP/%d, want HTTP/%d", p.name, seen.major.Load(), p.proto)
			}
			// The second stream came on the channel the first left idle, and
			// so on the upstream connection pinned to it.
			if first, second := <-peers, <-peers; first != second {
				t.Fatalf("%s: the two streams reached the backend from %s and %s: the channel was not kept", p.name, first, second)
			}
			head := got[p.name]
			for _, want := range []string{"X-Forwarded-For: 127.0.0.1", "X-Forwarded-Host: HOST", "X-Forwarded-Proto: https", "X-Client: kept", "body: hello", "trailer: 5"} {
				if !strings.Contains(head, want+"\n") && !strings.HasSuffix(head, want) {
					t.Fatalf("%s: the backend got no %q:\n%s", p.name, want, head)
				}
			}
			for _, spoofed := range []string{"X-Tuna-", "192.0.2.66", "evil.example", "Forwarded: "} {
				if strings.Contains(head, spoofed) {
					t.Fatalf("%s: a client's %q reached the backend:\n%s", p.name, spoofed, head)
				}
			}
		}
		if got["frames"] != got["http1-channels"] {
			t.Fatalf("the backend got different requests:\nframes:\n%s\nhttp1-channels:\n%s", got["frames"], got["http1-channels"])
		}
	})
}

// Server-sent events are not held back on either path: each event
// reaches the client before the backend writes the next; and a client
// that leaves (a reset stream) ends the backend's request.
func TestH2EventStreamAndResetOverBothPaths(t *testing.T) {
	forEachEdgeH2(t, func(t *testing.T, h *h2Edge) {
		next := make(chan struct{})
		ended := make(chan error, 1)
		backend := serveBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			rc := http.NewResponseController(w)
			for i := 0; ; i++ {
				if _, err := fmt.Fprintf(w, "data: %d\n\n", i); err != nil {
					return
				}
				_ = rc.Flush()
				select {
				case <-next:
				case <-r.Context().Done():
					ended <- r.Context().Err()
					return
				}
			}
		}))
		for _, p := range h2Paths {
			host, _ := h.publish(t, "events-"+p.name, proxy.Upstream{Scheme: "http", Addr: backend, Display: "backend"}, p.frames)
			ctx, cancel := context.WithCancel(context.Background())
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+"/events", nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := h.client(t).Do(req)
			if err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
			events := bufio.NewReader(res.Body)
			for i := range 3 {
				line, err := events.ReadString('\n')
				if err != nil || line != fmt.Sprintf("data: %d\n", i) {
					t.Fatalf("%s: event %d: %q, %v", p.name, i, line, err)
				}
				if _, err := events.ReadString('\n'); err != nil {
					t.Fatal(err)
				}
				next <- struct{}{} // the backend writes the next only now
			}
			cancel()
			_ = res.Body.Close()
			select {
			case err := <-ended:
				if err == nil {
					t.Fatalf("%s: the backend's request ended without an error", p.name)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("%s: the client left, and the backend's request did not end", p.name)
			}
		}
	})
}

// Behind an access policy, the identity fields reach the backend as the
// edge wrote them after the login (here basic auth), over both paths; the
// copies a client sent, on this host or any, never do.
func TestH2IdentityFieldsOverBothPaths(t *testing.T) {
	forEachEdgeH2(t, func(t *testing.T, h *h2Edge) {
		const owner = "c1/team-a"
		hash, err := bcrypt.GenerateFromPassword([]byte("opensesame"), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.api.PutAccessPolicy(context.Background(), apiwire.AccessPolicy{Name: "staff", Owner: owner, Rules: []apiwire.AccessRule{
			{BasicAuth: &apiwire.BasicAuthRule{Htpasswd: "alice:" + string(hash) + "\n"}},
		}}); err != nil {
			t.Fatal(err)
		}
		type seenFields struct{ user, groups, assertion string }
		got := make(chan seenFields, 1)
		backend := serveBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got <- seenFields{r.Header.Get("X-Tuna-User"), r.Header.Get("X-Tuna-Groups"), r.Header.Get("X-Tuna-Assertion")}
		}))
		for _, p := range h2Paths {
			label := "staff-" + p.name
			tk, err := h.api.CreateTunnelKey(context.Background(), apiwire.CreateTunnelKey{Protocol: "http", Address: label, Owner: owner})
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{
				Edge: tunnelclient.Config{Addr: h.e.SSHAddr(), Key: tk.Key, HostKey: h.e.HostKey(),
					KeepaliveInterval: 500 * time.Millisecond, KeepaliveTimeout: 2 * time.Second},
				Bind: protocol.BindRequest{Protocol: "http", AccessPolicy: "staff"},
			}
			seen := &protoSeen{h: proxy.NewHTTP(proxy.Upstream{Scheme: "http", Addr: backend, Display: "backend"}, nil)}
			tun := Start(cfg, Traffic{Handler: seen, Frames: p.frames}, DefaultBackoff, Hooks{}, logr.Discard(), nil)
			t.Cleanup(tun.Stop)
			waitConnected(t, tun)
			req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://"+label+".tuna.localhost/", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.SetBasicAuth("alice", "opensesame")
			req.Header.Set("X-Tuna-User", "admin")
			req.Header.Set("X-Tuna-Groups", "admins")
			res, err := h.client(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = res.Body.Close()
			if res.StatusCode != http.StatusOK || res.ProtoMajor != 2 {
				t.Fatalf("%s: %s over %s", p.name, res.Status, res.Proto)
			}
			f := <-got
			if f.user != "alice" || f.groups != "" || strings.Count(f.assertion, ".") != 2 {
				t.Fatalf("%s: the backend got user %q, groups %q, assertion %q: want the edge's alice, no groups, a signed assertion", p.name, f.user, f.groups, f.assertion)
			}
			if int(seen.major.Load()) != p.proto {
				t.Fatalf("%s: the agent's handler took the stream as HTTP/%d, want HTTP/%d", p.name, seen.major.Load(), p.proto)
			}
		}
	})
}

// By default an agent takes h2 streams in frames, whatever its
// upstream: an http upstream (which the h1 relay serves on HTTP/1.1
// channels) as an h2c one, so the edge writes and parses no HTTP/1.1
// for an HTTP/2 stream.
func TestFramesByDefault(t *testing.T) {
	forEachEdgeH2(t, func(t *testing.T, h *h2Edge) {
		ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
		h1Backend := serveBackend(t, ok)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := &http.Protocols{}
		p.SetUnencryptedHTTP2(true)
		h2c := &http.Server{Handler: ok, Protocols: p, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = h2c.Serve(ln) }()
		t.Cleanup(func() { _ = h2c.Close() })
		for _, c := range []struct {
			label string
			up    proxy.Upstream
			proto int
		}{
			{"auto-http", proxy.Upstream{Scheme: "http", Addr: h1Backend, Display: "backend"}, 2},
			{"auto-h2c", proxy.Upstream{Scheme: proxy.SchemeH2C, Addr: ln.Addr().String(), Display: "h2c"}, 2},
		} {
			host, seen := h.publish(t, c.label, c.up, FramesAuto)
			res, err := h.client(t).Get("https://" + host + "/")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if string(body) != "ok" || int(seen.major.Load()) != c.proto {
				t.Fatalf("%s: %q, the agent's handler took the stream as HTTP/%d, want HTTP/%d", c.label, body, seen.major.Load(), c.proto)
			}
		}
	})
}
