package server_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
)

// limitRefusals reads tuna_edge_limit_refusals_total{limit=limit}.
func limitRefusals(t *testing.T, e *testEdge, limit string) float64 {
	t.Helper()
	v, ok := counterValue(t, e, "tuna_edge_limit_refusals_total", "limit", limit)
	if !ok {
		t.Fatalf("no tuna_edge_limit_refusals_total{limit=%q}", limit)
	}
	return v
}

// counterValue reads the counter name{label=value} of e's registry.
func counterValue(t *testing.T, e *testEdge, name, label, value string) (float64, bool) {
	t.Helper()
	mfs, err := e.Metrics().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

func TestHandshakeLimit(t *testing.T) {
	e := startEdge(t, t.TempDir(), func(c *server.Config) { c.MaxHandshakes = 2 })
	// Two connections that never log in hold both handshake slots.
	var idle []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", e.SSHAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// The server's version line proves it accepted the connection.
		if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.HasPrefix(line, "SSH-2.0-") {
			t.Fatalf("idle connection: %q %v", line, err)
		}
		idle = append(idle, c)
	}
	c, err := net.Dial("tcp", e.SSHAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c) // the refusal line, then EOF
	if err != nil {
		t.Fatalf("reading the refusal: %v", err)
	}
	want := "tuna-edge: limit_exceeded: too many SSH logins in progress on this edge; retry shortly (limit handshakes=2)\r\n"
	if string(got) != want {
		t.Fatalf("over the limit the edge sent %q, want %q", got, want)
	}
	if n := limitRefusals(t, e, "handshakes"); n != 1 {
		t.Fatalf("handshakes refusals = %v, want 1", n)
	}
	// A slot frees as soon as a pending login ends.
	for _, c := range idle {
		_ = c.Close()
	}
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http"})
	waitFor(t, "a login to get through", func() bool {
		s, err := e.dial(t, tk.Key)
		if err == nil {
			_ = s.Close()
		}
		return err == nil
	})
}

func TestSessionsPerKeyLimit(t *testing.T) {
	e := startEdge(t, t.TempDir(), func(c *server.Config) { c.MaxSessionsPerKey = 2 })
	key, err := e.CreateAPIKey("agent", []string{apiwire.ScopeConnect})
	if err != nil {
		t.Fatal(err)
	}
	first := e.mustDial(t, key)
	e.mustDial(t, key)
	_, err = e.dial(t, key)
	var ae *tunnelclient.AuthError
	if !errors.As(err, &ae) || ae.Code != protocol.CodeLimitExceeded || !strings.Contains(ae.Reason, "(limit sessions_per_key=2)") {
		t.Fatalf("third session: %v, want an AuthError limit_exceeded naming sessions_per_key=2", err)
	}
	if n := limitRefusals(t, e, "sessions_per_key"); n != 1 {
		t.Fatalf("sessions_per_key refusals = %v, want 1", n)
	}
	// An ended session gives its slot back.
	_ = first.Close()
	waitFor(t, "the first session to end", func() bool { return len(e.ActiveSessions()) == 1 })
	e.mustDial(t, key)
}

func TestBindsPerSessionLimit(t *testing.T) {
	e := startEdge(t, t.TempDir(), func(c *server.Config) { c.MaxBindsPerSession = 2 })
	key, err := e.CreateAPIKey("agent", []string{apiwire.ScopeConnect})
	if err != nil {
		t.Fatal(err)
	}
	s := e.mustDial(t, key)
	bind(t, s, protocol.BindRequest{Protocol: "http", Subdomain: "b1"})
	bind(t, s, protocol.BindRequest{Protocol: "http", Subdomain: "b2"})
	bind(t, s, protocol.BindRequest{Protocol: "http", Subdomain: "b1"}) // a retry is no new bind
	_, err = s.Bind(context.Background(), protocol.BindRequest{Protocol: "http", Subdomain: "b3"})
	var be *tunnelclient.BindError
	if !errors.As(err, &be) || be.Code != protocol.CodeLimitExceeded || !strings.Contains(be.Message, "(limit binds_per_session=2)") {
		t.Fatalf("third bind: %v, want limit_exceeded naming binds_per_session=2", err)
	}
	if n := limitRefusals(t, e, "binds_per_session"); n != 1 {
		t.Fatalf("binds_per_session refusals = %v, want 1", n)
	}
}

// blockingTunnel binds host and serves requests that wait for release;
// inFlight counts the requests the agent holds.
func blockingTunnel(t *testing.T, e *testEdge, sub string) (inFlight func() int, release func()) {
	t.Helper()
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http"})
	s := e.mustDial(t, tk.Key)
	bind(t, s, protocol.BindRequest{Protocol: "http", Subdomain: sub})
	var mu sync.Mutex
	n := 0
	gate := make(chan struct{})
	var once sync.Once
	serveHTTP(t, s, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		<-gate
		_, _ = io.WriteString(w, "done")
	}))
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	return func() int { mu.Lock(); defer mu.Unlock(); return n }, release
}

// holdRequests sends n requests for host that the agent holds.
func holdRequests(t *testing.T, e *testEdge, host string, n int, inFlight func() int) *sync.WaitGroup {
	t.Helper()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodGet, "http://"+e.HTTPAddr()+"/", nil)
			req.Host = host
			// Own connection per request: each is a distinct public client.
			resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	waitFor(t, "the agent to hold the requests", func() bool { return inFlight() == n })
	return &wg
}

func TestConnectionsPerTunnelLimitHTTP(t *testing.T) {
	e := startEdge(t, t.TempDir(), func(c *server.Config) { c.MaxConnectionsPerTunnel = 2 })
	inFlight, release := blockingTunnel(t, e, "busy")
	wg := holdRequests(t, e, "busy."+baseDomain, 2, inFlight)
	code, body, hdr := e.get(t, "busy."+baseDomain, "/", nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "limit_exceeded") ||
		!strings.Contains(body, "(limit connections_per_tunnel=2)") || hdr.Get("Retry-After") == "" {
		t.Fatalf("third request: %d %q Retry-After=%q, want 503 limit_exceeded naming connections_per_tunnel=2", code, body, hdr.Get("Retry-After"))
	}
	if n := limitRefusals(t, e, "connections_per_tunnel"); n != 1 {
		t.Fatalf("connections_per_tunnel refusals = %v, want 1", n)
	}
	release()
	wg.Wait()
	if code, body, _ := e.get(t, "busy."+baseDomain, "/", nil); code != 200 || body != "done" {
		t.Fatalf("after the requests ended: %d %q", code, body)
	}
}

func TestChannelsPerSessionLimit(t *testing.T) {
	e := startEdge(t, t.TempDir(), func(c *server.Config) { c.MaxChannelsPerSession = 2 })
	inFlight, release := blockingTunnel(t, e, "chan")
	wg := holdRequests(t, e, "chan."+baseDomain, 2, inFlight)
	code, body, _ := e.get(t, "chan."+baseDomain, "/", nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "limit_exceeded") || !strings.Contains(body, "(limit channels_per_session=2)") {
		t.Fatalf("third request: %d %q, want 503 limit_exceeded naming channels_per_session=2", code, body)
	}
	if n := limitRefusals(t, e, "channels_per_session"); n != 1 {
		t.Fatalf("channels_per_session refusals = %v, want 1", n)
	}
	release()
	wg.Wait()
}

func TestConnectionsPerTunnelLimitTCP(t *testing.T) {
	e := startEdge(t, t.TempDir(), func(c *server.Config) { c.MaxConnectionsPerTunnel = 2 })
	s, _, ep := tcpTunnel(t, e, "lim", protocol.BindRequest{Alias: "lim"})
	var mu sync.Mutex
	accepted := 0
	go func() {
		for {
			c, err := s.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			accepted++
			mu.Unlock()
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	for range 2 {
		c, err := net.Dial("tcp", ep.Address)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// An echoed byte proves the connection is carried by the tunnel.
		buf := make([]byte, 1)
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatalf("echo: %v", err)
		}
	}
	c, err := net.Dial("tcp", ep.Address)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		t.Fatalf("third connection: read %d bytes, err %v; want it closed at once", n, err)
	}
	if n := limitRefusals(t, e, "connections_per_tunnel"); n != 1 {
		t.Fatalf("connections_per_tunnel refusals = %v, want 1", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if accepted != 2 {
		t.Fatalf("the agent got %d connections, want 2: the refused one must not reach it", accepted)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
