package server_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/metrics"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
)

// named answers with its name, so a test sees which replica served it.
func named(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, name) })
}

// getFresh sends one request on a new public connection: the edge picks a
// session of the pool per public connection it dials a channel for.
func (e *testEdge) getFresh(t testing.TB, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+e.HTTPAddr()+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	req.Close = true
	resp, err := (&http.Transport{DisableKeepAlives: true}).RoundTrip(req)
	if err != nil {
		t.Fatalf("GET %s: %v", host, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// served counts which replica answered n fresh requests; any other answer
// fails the test.
func (e *testEdge) served(t testing.TB, host string, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		code, body := e.getFresh(t, host)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %q", host, code, body)
		}
		got[body]++
	}
	return got
}

func TestTunnelKeyPoolSpreadsAndSurvivesAMember(t *testing.T) {
	e := startEdge(t, t.TempDir())
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "pooled", MaxSessions: 2})
	if tk.MaxSessions != 2 {
		t.Fatalf("issued key's max_sessions = %d, want 2", tk.MaxSessions)
	}
	a, b := e.mustDial(t, tk.Key), e.mustDial(t, tk.Key)
	ra, rb := bind(t, a, protocol.BindRequest{Protocol: "http"}), bind(t, b, protocol.BindRequest{Protocol: "http"})
	if ra.URL != rb.URL || ra.SessionID == rb.SessionID {
		t.Fatalf("replicas bound %q (%s) and %q (%s): want one URL, two sessions", ra.URL, ra.SessionID, rb.URL, rb.SessionID)
	}
	serveHTTP(t, a, named("a"))
	serveHTTP(t, b, named("b"))
	host := "pooled." + baseDomain

	// Idle replicas take turns: both serve.
	if got := e.served(t, host, 20); got["a"] == 0 || got["b"] == 0 {
		t.Fatalf("requests served = %v, want both replicas", got)
	}
	live, err := e.client(e.writeKey).GetTunnelKey(context.Background(), tk.ID)
	if err != nil || len(live.Sessions) != 2 || live.Session == nil {
		t.Fatalf("GET tunnel key: %+v, %v; want two sessions", live, err)
	}

	// A third session is past the key's pool: refused with a code and the
	// limit's name and value.
	_, err = e.dial(t, tk.Key)
	var ae *tunnelclient.AuthError
	if !errors.As(err, &ae) || ae.Code != protocol.CodeLimitExceeded ||
		!strings.Contains(ae.Reason, metrics.LimitSessionsPerTunnelKey+"=2") {
		t.Fatalf("third session: %v; want limit_exceeded naming %s=2", err, metrics.LimitSessionsPerTunnelKey)
	}

	// One replica gone: the other serves every request.
	_ = a.Close()
	waitFor(t, "a's session to end", func() bool { return len(e.ActiveSessions()) == 1 })
	if got := e.served(t, host, 10); got["b"] != 10 {
		t.Fatalf("after a left: served %v, want all by b", got)
	}
	// ...and its place is free again.
	c := e.mustDial(t, tk.Key)
	bind(t, c, protocol.BindRequest{Protocol: "http"})
}

func TestDrainingSessionGetsNoNewConnections(t *testing.T) {
	e := startEdge(t, t.TempDir())
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "drain"})
	a, b := e.mustDial(t, tk.Key), e.mustDial(t, tk.Key)
	bind(t, a, protocol.BindRequest{Protocol: "http"})
	bind(t, b, protocol.BindRequest{Protocol: "http"})
	serveHTTP(t, a, named("a"))
	serveHTTP(t, b, named("b"))
	host := "drain." + baseDomain
	if err := a.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := e.served(t, host, 10); got["b"] != 10 {
		t.Fatalf("with a draining: served %v, want all by b", got)
	}
	live, err := e.client(e.writeKey).GetTunnelKey(context.Background(), tk.ID)
	if err != nil || len(live.Sessions) != 2 || live.Sessions[0].Draining == live.Sessions[1].Draining {
		t.Fatalf("GET tunnel key: %+v, %v; want one draining session of two", live.Sessions, err)
	}
	// When the whole pool drains, it still serves rather than refuse.
	if err := b.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := e.served(t, host, 4); got["a"]+got["b"] != 4 {
		t.Fatalf("all draining: served %v", got)
	}
}

func TestPoolKeepsOneAddressPerKey(t *testing.T) {
	e := startEdge(t, t.TempDir())
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http"}) // any address
	a, b := e.mustDial(t, tk.Key), e.mustDial(t, tk.Key)
	first := bind(t, a, protocol.BindRequest{Protocol: "http", Subdomain: "chosen"})
	// A replica that names no address joins the key's pool...
	if got := bind(t, b, protocol.BindRequest{Protocol: "http"}); got.URL != first.URL {
		t.Fatalf("second replica bound %q, want %q", got.URL, first.URL)
	}
	// ...and one that names another is refused: a key serves one address.
	c := e.mustDial(t, tk.Key)
	_, err := c.Bind(context.Background(), protocol.BindRequest{Protocol: "http", Subdomain: "other"})
	var be *tunnelclient.BindError
	if !errors.As(err, &be) || be.Code != protocol.CodeForbidden || !strings.Contains(be.Message, "chosen.") {
		t.Fatalf("bind of another address: %v; want forbidden naming the key's address", err)
	}
	// Sessions of another key cannot join the pool.
	other := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http"})
	d := e.mustDial(t, other.Key)
	_, err = d.Bind(context.Background(), protocol.BindRequest{Protocol: "http", Subdomain: "chosen"})
	if !errors.As(err, &be) || be.Code != protocol.CodeAddressTaken {
		t.Fatalf("another key binds the pool's address: %v; want address_taken", err)
	}
}

func TestDefaultPoolBound(t *testing.T) {
	e := startEdge(t, t.TempDir(), func(c *server.Config) { c.MaxSessionsPerTunnelKey = 3 })
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "bounded"})
	for range 3 {
		e.mustDial(t, tk.Key)
	}
	var ae *tunnelclient.AuthError
	if _, err := e.dial(t, tk.Key); !errors.As(err, &ae) || ae.Code != protocol.CodeLimitExceeded {
		t.Fatalf("fourth session with the edge's pool of 3: %v", err)
	}
	_, err := e.client(e.writeKey).CreateTunnelKey(context.Background(), apiwire.CreateTunnelKey{Protocol: "http", MaxSessions: 65})
	if apiCode(err) != apiwire.CodeInvalidRequest {
		t.Fatalf("key with max_sessions 65: %v; want invalid_request", err)
	}
	for _, n := range []int{-1, 65} {
		cfg := server.Config{DataDir: t.TempDir(), BaseDomain: baseDomain, APIListen: "127.0.0.1:0", SSHListen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0", MaxSessionsPerTunnelKey: n}
		if _, err := server.New(cfg); err == nil || !strings.Contains(err.Error(), "max sessions per tunnel key") {
			t.Fatalf("edge with a pool of %d: %v", n, err)
		}
	}
}

func TestTCPPoolSpreadsAndSurvivesAMember(t *testing.T) {
	e := startEdge(t, t.TempDir())
	ep, err := e.client(e.writeKey).CreateTCPEndpoint(context.Background(), apiwire.CreateTCPEndpoint{Alias: "pooldb"})
	if err != nil {
		t.Fatal(err)
	}
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "tcp", Address: "pooldb"})
	a, b := e.mustDial(t, tk.Key), e.mustDial(t, tk.Key)
	for name, s := range map[string]*tunnelclient.Session{"a": a, "b": b} {
		bind(t, s, protocol.BindRequest{Protocol: "tcp"})
		go func() {
			for {
				c, err := s.Accept()
				if err != nil {
					return
				}
				_, _ = io.WriteString(c, name)
				_ = c.Close()
			}
		}()
	}
	who := func() string {
		c, err := net.Dial("tcp", ep.Address)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		return string(b)
	}
	got := map[string]int{}
	for range 20 {
		got[who()]++
	}
	if got["a"] == 0 || got["b"] == 0 || got["a"]+got["b"] != 20 {
		t.Fatalf("TCP connections served = %v, want both replicas", got)
	}
	_ = a.Close()
	waitFor(t, "a's session to end", func() bool { return len(e.ActiveSessions()) == 1 })
	for i := range 5 {
		if w := who(); w != "b" {
			t.Fatalf("connection %d after a left served by %q, want b", i, w)
		}
	}
	_ = b.Close()
	waitFor(t, "b's session to end", func() bool { return len(e.ActiveSessions()) == 0 })
	if w := who(); w != "" {
		t.Fatalf("connection with no session served by %q", w)
	}
	// A new pool for the port attaches again.
	c := e.mustDial(t, tk.Key)
	bind(t, c, protocol.BindRequest{Protocol: "tcp"})
	serveEcho(c)
	roundTrip(t, ep.Address, "back")
}
