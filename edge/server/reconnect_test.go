package server_test

import (
	"context"
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

// An agent that reconnects right after its session closed must never be
// told that its own old session still holds the key.
func TestRedialRightAfterCloseIsNeverRefused(t *testing.T) {
	// Each dial reads the edge's info from the API: 100 of them in a row
	// are over the default per-key rate, which this test is not about.
	e := startEdge(t, t.TempDir(), func(c *server.Config) { c.APIRateLimit, c.APIRateBurst = 1000, 1000 })
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "again"})
	for i := range 100 {
		s, err := e.dial(t, tk.Key)
		if err != nil {
			t.Fatalf("dial %d right after the previous session closed: %v", i, err)
		}
		if i%10 == 0 { // now and then with a bound address to release too
			bind(t, s, protocol.BindRequest{Protocol: "http"})
		}
		_ = s.Close()
	}
}

// relay forwards TCP to target until frozen; a frozen relay keeps both
// connections open but moves no byte, as a link to a lost node would.
type relay struct {
	ln     net.Listener
	mu     sync.Mutex
	frozen chan struct{} // closed when frozen
	stop   chan struct{} // closed when the test ends
}

func startRelay(t *testing.T, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, frozen: make(chan struct{}), stop: make(chan struct{})}
	var conns []net.Conn
	t.Cleanup(func() {
		close(r.stop)
		_ = ln.Close()
		r.mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		r.mu.Unlock()
	})
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			r.mu.Lock()
			conns = append(conns, in, out)
			r.mu.Unlock()
			go r.pipe(out, in)
			go r.pipe(in, out)
		}
	}()
	return r
}

func (r *relay) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-r.frozen:
			<-r.stop // hold the bytes until the test ends
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

func (r *relay) freeze() { close(r.frozen) }

func (r *relay) addr() string { return r.ln.Addr().String() }

// A session whose agent vanished without closing its connection (its node
// was lost) must not keep its place in a full pool: the new session's login
// probes the old one, finds it silent, ends it and takes its place.
func TestKeyOfAVanishedAgentIsReclaimed(t *testing.T) {
	e := startEdge(t, t.TempDir())
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "lost", MaxSessions: 1})
	info := e.info(t)
	r := startRelay(t, info.SSHAddr)
	old, err := tunnelclient.Dial(context.Background(), tunnelclient.Config{
		Addr: r.addr(), Key: tk.Key, HostKey: info.SSHHostKey,
		// The agent's own keepalives must not end the old session first.
		KeepaliveInterval: time.Hour, KeepaliveTimeout: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	bind(t, old, protocol.BindRequest{Protocol: "http"})

	// While the old session answers, the key stays with it.
	if _, err := e.dial(t, tk.Key); err == nil || !strings.Contains(err.Error(), "as many as its pool allows") {
		t.Fatalf("second session while the first is alive: %v", err)
	}
	r.freeze()
	s := e.mustDial(t, tk.Key)
	if got := bind(t, s, protocol.BindRequest{Protocol: "http"}); !strings.HasPrefix(got.URL, "http://lost.") {
		t.Fatalf("URL = %q", got.URL)
	}
	serveHTTP(t, s, http.HandlerFunc(hello))
	if code, body, _ := e.get(t, "lost."+baseDomain, "/", nil); code != 200 || body != "hello from the agent" {
		t.Fatalf("new session serves: %d %q", code, body)
	}
	if n := len(e.ActiveSessions()); n != 1 {
		t.Fatalf("%d live sessions, want only the new one", n)
	}
}
