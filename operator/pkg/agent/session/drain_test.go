package session

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	"code.tuna.am/tuna/k8s-operator/tests/testedge"
)

// startEdge runs a real edge on loopback and issues an http tunnel key for
// host's label.
func startEdge(t testing.TB, label string) (*server.Edge, Config) {
	t.Helper()
	e, c := newEdge(t)
	tk, err := c.CreateTunnelKey(context.Background(), apiwire.CreateTunnelKey{Protocol: "http", Address: label})
	if err != nil {
		t.Fatal(err)
	}
	return e, Config{
		Edge: tunnelclient.Config{Addr: e.SSHAddr(), Key: tk.Key, HostKey: e.HostKey(),
			KeepaliveInterval: 500 * time.Millisecond, KeepaliveTimeout: 2 * time.Second},
		Bind: protocol.BindRequest{Protocol: "http"},
	}
}

// newEdge starts a real edge on loopback (one TCP port in its range) and
// returns it with a control API client holding a write key.
func newEdge(t testing.TB) (*server.Edge, *client.Client) {
	t.Helper()
	e := testedge.Start(t, testedge.Config(t, t.TempDir()))
	c, _ := testedge.Client(t, e, "operator", apiwire.ScopeWrite)
	return e, c
}

func waitConnected(t *testing.T, tun *Tunnel) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for tun.State().Phase != PhaseConnected {
		if time.Now().After(deadline) {
			t.Fatalf("tunnel not connected: %+v", tun.State())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func fetch(t *testing.T, addr, host string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	req.Host = host
	resp, err := (&http.Transport{DisableKeepAlives: true}).RoundTrip(req)
	if err != nil {
		t.Fatalf("GET %s: %v", host, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A draining replica finishes its request in flight while the other
// replica of the pool takes every new one, and no request fails.
func TestDrainHandsNewRequestsToTheOtherReplica(t *testing.T) {
	e, cfg := startEdge(t, "drainme")
	host := "drainme.tuna.localhost"
	started, release := make(chan struct{}), make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("slow") != "" {
			close(started)
			<-release
		}
		_, _ = io.WriteString(w, "a")
	})
	a := Start(cfg, Traffic{Handler: slow}, DefaultBackoff, Hooks{}, logr.Discard(), nil)
	waitConnected(t, a)

	type result struct {
		code int
		body string
	}
	slowDone := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, "http://"+e.HTTPAddr()+"/?slow=1", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			slowDone <- result{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		slowDone <- result{resp.StatusCode, string(b)}
	}()
	<-started // in flight on a, the only replica

	b := Start(cfg, Traffic{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "b")
	})}, DefaultBackoff, Hooks{}, logr.Discard(), nil)
	defer b.Stop()
	waitConnected(t, b)

	drained := make(chan struct{})
	go func() { a.Drain(10 * time.Second); close(drained) }()
	// Once a has told the edge, every new request goes to b.
	deadline := time.Now().Add(10 * time.Second)
	for {
		sessions := e.ActiveSessions()
		if len(sessions) == 2 && (sessions[0].Draining || sessions[1].Draining) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session is draining: %+v", sessions)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := range 10 {
		if code, body := fetch(t, e.HTTPAddr(), host); code != http.StatusOK || body != "b" {
			t.Fatalf("request %d during the drain: %d %q, want 200 from b", i, code, body)
		}
	}
	select {
	case <-drained:
		t.Fatal("drain ended with a request in flight")
	default:
	}
	close(release)
	if r := <-slowDone; r.code != http.StatusOK || r.body != "a" {
		t.Fatalf("request in flight on the draining replica: %+v", r)
	}
	<-drained
	if code, body := fetch(t, e.HTTPAddr(), host); code != http.StatusOK || body != "b" {
		t.Fatalf("after the drain: %d %q", code, body)
	}
}

func TestEdgeShutdownMeansReconnectNow(t *testing.T) {
	for err, want := range map[error]bool{
		&tunnelclient.TerminatedError{Code: protocol.CodeEdgeShuttingDown}: true,
		&tunnelclient.TerminatedError{Code: protocol.CodeKeyRevoked}:       false,
		&tunnelclient.AuthError{Reason: "edge is shutting down"}:           false,
		context.Canceled: false,
	} {
		if got := reconnectNow(err); got != want {
			t.Errorf("reconnectNow(%v) = %v, want %v", err, got, want)
		}
	}
}

// A replica that drains while it is the only live member of its pool (its
// replacement has not connected yet, as when a rolling update's new pod
// is slow to reach the edge) serves on until the replacement joins, then
// leaves: no request fails, none runs twice. Before the leave step, the
// draining replica closed its session as soon as it had nothing open, and
// requests the edge was still sending it (the pool's only choice) failed.
func TestDrainOfTheLastMemberWaitsForItsReplacement(t *testing.T) {
	e, cfg := startEdge(t, "last")
	once := &onceHandler{seen: map[string]bool{}}
	h := upstreamProxy(t, once)
	a := replica(t, cfg, h)
	l := startLoad(e.HTTPAddr(), "last.tuna.localhost", 4)
	waitFor(t, "traffic through the first replica", func() bool { return l.ok.Load() > 50 })

	drained := make(chan struct{})
	go func() { a.Drain(10 * time.Second); close(drained) }()
	// The replacement comes once the drain has begun.
	waitFor(t, "the first replica to drain", func() bool { return anyDraining(e) })
	okAtDrain := l.ok.Load()
	b := replica(t, cfg, h)
	defer b.Stop()
	select {
	case <-drained:
	case <-time.After(15 * time.Second):
		t.Fatal("the drain did not end once the replacement joined")
	}
	waitFor(t, "traffic through the replacement", func() bool { return l.ok.Load() > okAtDrain+50 })
	l.end()
	if f, d := l.failed.Load(), once.duplicates(); f != 0 || d != 0 {
		t.Fatalf("%d requests failed and %d ran twice (%d served)", f, d, l.ok.Load())
	}
}

// anyDraining reports whether a session of the edge drains.
func anyDraining(e *server.Edge) bool {
	for _, s := range e.ActiveSessions() {
		if s.Draining {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
