package tunnelclient

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

// silentEdge is a real SSH server on loopback that accepts any password and
// then never answers a request: a hung edge.
func silentEdge(t *testing.T) (addr, hostKey string) {
	t.Helper()
	return silentEdgeSeeing(t, func(net.Addr) {})
}

// silentEdgeSeeing is silentEdge, telling seen where each connection came
// from.
func silentEdgeSeeing(t *testing.T, seen func(net.Addr)) (addr, hostKey string) {
	t.Helper()
	return sshEdge(t, seen, func(_ *ssh.ServerConn, chans <-chan ssh.NewChannel, _ <-chan *ssh.Request) {
		// Global requests are never read, so never answered.
		for range chans {
		}
	})
}

// sshEdge is a real SSH server on loopback that accepts any password,
// tells seen where each connection came from and hands it to serve.
func sshEdge(t *testing.T, seen func(net.Addr), serve func(*ssh.ServerConn, <-chan ssh.NewChannel, <-chan *ssh.Request)) (addr, hostKey string) {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{PasswordCallback: func(ssh.ConnMetadata, []byte) (*ssh.Permissions, error) { return nil, nil }}
	cfg.AddHostKey(signer)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			seen(c.RemoteAddr())
			go func() {
				sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
				if err != nil {
					return
				}
				t.Cleanup(func() { _ = sc.Close() })
				serve(sc, chans, reqs)
			}()
		}
	}()
	return ln.Addr().String(), string(ssh.MarshalAuthorizedKey(signer.PublicKey()))
}

func TestKeepaliveTimeoutEndsSession(t *testing.T) {
	addr, hk := silentEdge(t)
	s, err := Dial(context.Background(), Config{
		Addr: addr, Key: "k", HostKey: hk,
		KeepaliveInterval: 50 * time.Millisecond, KeepaliveTimeout: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Err() != nil {
		t.Fatal("Err() before the end")
	}
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("session survived a silent edge")
	}
	var te *TerminatedError
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "keepalive timeout") || errors.As(err, &te) {
		t.Fatalf("Err() = %v, want a keepalive timeout", err)
	}
	// Closed for good, so an accept loop ends rather than retrying the
	// timeout that ended the session.
	if _, err := s.Accept(); !errors.Is(err, net.ErrClosed) || !strings.Contains(err.Error(), "keepalive timeout") {
		t.Fatalf("Accept after the end = %v, want net.ErrClosed with the session's end", err)
	}
}

func TestDialValidatesConfig(t *testing.T) {
	if _, err := Dial(context.Background(), Config{Addr: "127.0.0.1:1", Key: "k"}); err == nil || !strings.Contains(err.Error(), "HostKey is required") {
		t.Fatalf("no host key: %v", err)
	}
	if _, err := Dial(context.Background(), Config{Addr: "127.0.0.1:1", Key: "k", HostKey: "junk"}); err == nil {
		t.Fatal("junk host key accepted")
	}
}

// A session dials from LocalAddr when one is set: the edge sees it come
// from there.
func TestDialFromLocalAddr(t *testing.T) {
	from := make(chan net.Addr, 1)
	addr, hk := silentEdgeSeeing(t, func(a net.Addr) { from <- a })
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}
	s, err := Dial(context.Background(), Config{Addr: addr, Key: "k", HostKey: hk, KeepaliveInterval: time.Hour, LocalAddr: local})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := (<-from).(*net.TCPAddr); !got.IP.Equal(local.IP) {
		t.Fatalf("the edge saw the session come from %s, want %s", got.IP, local.IP)
	}
}

func TestListenerCloseStopsAccept(t *testing.T) {
	addr, hk := silentEdge(t)
	s, err := Dial(context.Background(), Config{Addr: addr, Key: "k", HostKey: hk, KeepaliveInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l := s.Listener()
	done := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		done <- err
	}()
	_ = l.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept did not return after Close")
	}
	select {
	case <-s.Done():
		t.Fatal("closing the listener ended the session")
	default:
	}
}

func TestReasonCode(t *testing.T) {
	for reason, want := range map[string]string{
		"limit_exceeded: API key x already has 10 live sessions (limit sessions_per_key=10)": "limit_exceeded",
		"key_expired: tunnel key k expired at 2026-01-01T00:00:00Z":                          "key_expired",
		"invalid or revoked key":                                    "",
		`unknown user "x": agents log in as "tuna"`:                 "",
		"tunnel key k already has a live session: a tunnel key ...": "",
		"API key k has scopes [full]: only tunnel keys ...":         "",
	} {
		if got := reasonCode(reason); got != want {
			t.Errorf("reasonCode(%q) = %q, want %q", reason, got, want)
		}
	}
}

// slowBindEdge is a real SSH server on loopback that answers requests in
// order, as the edge does, taking slow over each bind (a store that is
// slow to answer), and pings the client every 50 ms, as the edge does.
func slowBindEdge(t *testing.T, slow time.Duration) (addr, hostKey string) {
	t.Helper()
	return sshEdge(t, func(net.Addr) {}, func(sc *ssh.ServerConn, chans <-chan ssh.NewChannel, reqs <-chan *ssh.Request) {
		go func() {
			for range chans {
			}
		}()
		go func() {
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for range tick.C {
				if _, _, err := sc.SendRequest(protocol.KeepaliveRequestType, true, nil); err != nil {
					return
				}
			}
		}()
		for req := range reqs {
			if req.Type == protocol.BindRequestType {
				time.Sleep(slow) // the store's answer, not a wait for a condition
				_ = req.Reply(true, []byte("{}"))
				continue
			}
			_ = req.Reply(req.Type == protocol.KeepaliveRequestType, nil)
		}
	})
}

// A keepalive that starts as a bind does waits behind the bind's answer
// (SSH answers requests in order, and x/crypto/ssh sends one request at a
// time): it must not end a session whose edge is heard from meanwhile.
// With a keepalive every 2 ms, binds that each take longer than the
// keepalive timeout meet one at their start again and again. The edge's
// own keepalives come every 50 ms: the timeout leaves a loaded machine
// 950 ms to deliver one (250 ms were not enough at a load of 35 on two
// cores).
func TestKeepaliveBehindASlowBindKeepsTheSession(t *testing.T) {
	const timeout = time.Second
	addr, hk := slowBindEdge(t, timeout+100*time.Millisecond)
	s, err := Dial(context.Background(), Config{
		Addr: addr, Key: "k", HostKey: hk,
		KeepaliveInterval: 2 * time.Millisecond, KeepaliveTimeout: timeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 5 {
		if _, err := s.Bind(context.Background(), protocol.BindRequest{Protocol: "http", Subdomain: "app"}); err != nil {
			t.Fatalf("bind %d: %v (session: %v)", i, err, s.Err())
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("the session ended: %v", err)
	}
}
