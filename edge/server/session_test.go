package server_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
)

func TestConnectRefusals(t *testing.T) {
	e := startEdge(t, t.TempDir())
	connectKey, err := e.CreateAPIKey("user", []string{apiwire.ScopeConnect})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, key, want string
	}{
		{"write key", e.writeKey, "only tunnel keys and API keys with scope"},
		{"full key", e.fullKey, "only tunnel keys and API keys with scope"},
		{"garbage", "tunt_0000000000000000_nope", "invalid or revoked key"},
		{"empty", "", "invalid or revoked key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.dial(t, c.key)
			var ae *tunnelclient.AuthError
			if !errors.As(err, &ae) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("dial error = %v, want AuthError containing %q", err, c.want)
			}
		})
	}
	t.Run("connect key may open tunnels", func(t *testing.T) {
		s := e.mustDial(t, connectKey)
		r := bind(t, s, protocol.BindRequest{Protocol: "http", Subdomain: "mine"})
		if !strings.HasPrefix(r.URL, "http://mine."+baseDomain+":") {
			t.Fatalf("URL = %q", r.URL)
		}
	})
	t.Run("wrong host key is refused", func(t *testing.T) {
		other := startEdge(t, t.TempDir())
		_, err := tunnelclient.Dial(context.Background(), tunnelclient.Config{
			Addr: e.info(t).SSHAddr, Key: connectKey, HostKey: other.info(t).SSHHostKey,
		})
		if err == nil || !strings.Contains(err.Error(), "host key") {
			t.Fatalf("dial with wrong host key: %v", err)
		}
	})
}

func TestTunnelKeyPoolOfOne(t *testing.T) {
	e := startEdge(t, t.TempDir())
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", MaxSessions: 1})
	first := e.mustDial(t, tk.Key)
	_, err := e.dial(t, tk.Key)
	if err == nil || !strings.Contains(err.Error(), "already has 1 live sessions") {
		t.Fatalf("second session: %v", err)
	}
	// Once the first session ends, the key may connect again.
	_ = first.Close()
	waitFor(t, "key to be released", func() bool { return len(e.ActiveSessions()) == 0 })
	e.mustDial(t, tk.Key)
}

func TestBindRefusals(t *testing.T) {
	e := startEdge(t, t.TempDir())
	httpKey := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "fixed"})
	s := e.mustDial(t, httpKey.Key)
	other := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http"})
	s2 := e.mustDial(t, other.Key)
	bind(t, s2, protocol.BindRequest{Protocol: "http", Subdomain: "busy"})

	cases := []struct {
		name string
		sess *tunnelclient.Session
		req  protocol.BindRequest
		code string
	}{
		{"protocol mismatch", s, protocol.BindRequest{Protocol: "tcp", Alias: "x"}, protocol.CodeForbidden},
		{"bad protocol", s, protocol.BindRequest{Protocol: "udp"}, protocol.CodeInvalidRequest},
		{"other address", s, protocol.BindRequest{Protocol: "http", Subdomain: "other"}, protocol.CodeForbidden},
		{"bad cidr", s, protocol.BindRequest{Protocol: "http", AllowCIDRs: []string{"nope"}}, protocol.CodeInvalidRequest},
		{"proxy protocol on http", s, protocol.BindRequest{Protocol: "http", ProxyProtocol: "v1"}, protocol.CodeInvalidRequest},
		{"unreserved custom domain", s2, protocol.BindRequest{Protocol: "http", Domain: "example.com"}, protocol.CodeAddressNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.sess.Bind(context.Background(), c.req)
			var be *tunnelclient.BindError
			if !errors.As(err, &be) || be.Code != c.code {
				t.Fatalf("bind error = %v, want code %s", err, c.code)
			}
		})
	}
	t.Run("address taken", func(t *testing.T) {
		connectKey, _ := e.CreateAPIKey("c", []string{apiwire.ScopeConnect})
		s3 := e.mustDial(t, connectKey)
		_, err := s3.Bind(context.Background(), protocol.BindRequest{Protocol: "http", Subdomain: "busy"})
		var be *tunnelclient.BindError
		if !errors.As(err, &be) || be.Code != protocol.CodeAddressTaken {
			t.Fatalf("bind error = %v, want address_taken", err)
		}
	})
	t.Run("key address is used when bind names none", func(t *testing.T) {
		r := bind(t, s, protocol.BindRequest{Protocol: "http"})
		if !strings.HasPrefix(r.URL, "http://fixed."+baseDomain+":") {
			t.Fatalf("URL = %q", r.URL)
		}
		// Binding the same address again is idempotent.
		if r2 := bind(t, s, protocol.BindRequest{Protocol: "http", Subdomain: "fixed"}); r2 != r {
			t.Fatalf("rebind = %+v, want %+v", r2, r)
		}
	})
}

func TestUnknownAndDisconnectedHosts(t *testing.T) {
	e := startEdge(t, t.TempDir())
	ctx := context.Background()
	if _, err := e.client(e.writeKey).CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "reserved"}); err != nil {
		t.Fatal(err)
	}
	e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "keyed"})

	code, body, _ := e.get(t, "nobody."+baseDomain, "/", nil)
	if code != http.StatusNotFound || !strings.Contains(body, "nobody."+baseDomain) {
		t.Fatalf("unknown host: %d %q", code, body)
	}
	for _, host := range []string{"reserved." + baseDomain, "keyed." + baseDomain} {
		code, body, _ = e.get(t, host, "/", nil)
		if code != http.StatusBadGateway || !strings.Contains(body, "not connected") {
			t.Fatalf("%s: %d %q", host, code, body)
		}
	}
}

func TestShutdownTerminatesSessions(t *testing.T) {
	e := startEdge(t, t.TempDir())
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http"})
	s := e.mustDial(t, tk.Key)
	bind(t, s, protocol.BindRequest{Protocol: "http", Subdomain: "bye"})
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	te := asTerminated(waitDone(t, s))
	if te == nil || te.Code != protocol.CodeEdgeShuttingDown {
		t.Fatalf("Err() = %v, want edge_shutting_down", s.Err())
	}
}

func TestCIDRDenyHTTP(t *testing.T) {
	e := startEdge(t, t.TempDir())
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http"})
	s := e.mustDial(t, tk.Key)
	bind(t, s, protocol.BindRequest{Protocol: "http", Subdomain: "private",
		AllowCIDRs: []string{"127.0.0.0/8"}, DenyCIDRs: []string{"127.0.0.1/32"}})
	served := make(chan struct{}, 1)
	serveHTTP(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served <- struct{}{} }))
	code, body, _ := e.get(t, "private."+baseDomain, "/", nil)
	if code != http.StatusForbidden {
		t.Fatalf("denied client got %d %q", code, body)
	}
	select {
	case <-served:
		t.Fatal("a denied request reached the agent")
	default:
	}
}

// An agent that stops answering keepalives loses its session, which frees
// its key for a reconnect.
func TestEdgeDropsSilentAgent(t *testing.T) {
	e := startEdge(t, t.TempDir(), func(c *server.Config) {
		c.KeepaliveInterval, c.KeepaliveTimeout = 50*time.Millisecond, 200*time.Millisecond
	})
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http"})
	info := e.info(t)
	pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(info.SSHHostKey))
	if err != nil {
		t.Fatal(err)
	}
	// A raw SSH client that never reads its global requests: a hung agent.
	conn, _, _, err := ssh.NewClientConn(mustDialTCP(t, info.SSHAddr), info.SSHAddr, &ssh.ClientConfig{
		User: protocol.SSHUser, Auth: []ssh.AuthMethod{ssh.Password(tk.Key)}, HostKeyCallback: ssh.FixedHostKey(pk),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitFor(t, "session to register", func() bool { return len(e.ActiveSessions()) == 1 })
	waitFor(t, "silent agent to be dropped", func() bool { return len(e.ActiveSessions()) == 0 })
	e.mustDial(t, tk.Key) // the key is free again
}

func mustDialTCP(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// An agent may not open channels: the edge refuses each one, and the
// session goes on, its keepalives answered, until the agent leaves.
func TestEdgeRefusesChannelsAnAgentOpens(t *testing.T) {
	e := startEdge(t, t.TempDir(), func(c *server.Config) {
		c.KeepaliveInterval, c.KeepaliveTimeout = 50*time.Millisecond, 200*time.Millisecond
	})
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http"})
	info := e.info(t)
	pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(info.SSHHostKey))
	if err != nil {
		t.Fatal(err)
	}
	conn, _, reqs, err := ssh.NewClientConn(mustDialTCP(t, info.SSHAddr), info.SSHAddr, &ssh.ClientConfig{
		User: protocol.SSHUser, Auth: []ssh.AuthMethod{ssh.Password(tk.Key)}, HostKeyCallback: ssh.FixedHostKey(pk),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	keepalives := make(chan struct{}, 100)
	go func() {
		for r := range reqs {
			if r.Type == protocol.KeepaliveRequestType {
				keepalives <- struct{}{}
			}
			_ = r.Reply(true, nil)
		}
	}()
	waitFor(t, "session to register", func() bool { return len(e.ActiveSessions()) == 1 })
	for range 2 {
		_, _, err := conn.OpenChannel("direct-tcpip", nil)
		var refused *ssh.OpenChannelError
		if !errors.As(err, &refused) || refused.Reason != ssh.Prohibited {
			t.Fatalf("a channel the agent opened: %v, want refused as prohibited", err)
		}
	}
	// Three keepalives after the refusals: the session is served still.
	for range 3 {
		select {
		case <-keepalives:
		case <-time.After(10 * time.Second):
			t.Fatal("no keepalive from the edge after the refused channels")
		}
	}
	if n := len(e.ActiveSessions()); n != 1 {
		t.Fatalf("%d sessions after the refused channels, want 1", n)
	}
	_ = conn.Close()
	waitFor(t, "session to leave", func() bool { return len(e.ActiveSessions()) == 0 })
}
