// Package testedge starts an edge in a test's own process: the one
// starting point of the in-process edges of the product's tests (the
// suites' harness runs edges its own way, as processes or for a control
// plane). It imports only the edge and tests/ports, so any package's
// tests may use it, the agent's included.
package testedge

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// BaseDomain is the edge's base domain in tests: curl and browsers
// resolve *.localhost to loopback.
const BaseDomain = "tuna.localhost"

// Config is the configuration of an edge that a test runs in its
// own process, the one starting point of every such edge: its state in
// dir; its API, SSH and HTTP listeners and three TCP endpoint ports on
// loopback, from this test process's own block of ports (never ephemeral
// ones: a restart test closes and reopens them, and another process's
// outbound connection must not take a TCP endpoint's port before the edge
// binds it); keepalives that notice a lost session within seconds. A test
// changes what it needs, then calls Start (or server.New itself,
// to see a start-up error).
func Config(t testing.TB, dir string) server.Config {
	t.Helper()
	return server.Config{
		DataDir:           dir,
		BaseDomain:        BaseDomain,
		APIListen:         ports.Addr(t),
		SSHListen:         ports.Addr(t),
		HTTPListen:        ports.Addr(t),
		TCPListenHost:     "127.0.0.1",
		PublicTCPHost:     "127.0.0.1",
		TCPPortRange:      ports.Range(t, 3),
		KeepaliveInterval: 500 * time.Millisecond,
		KeepaliveTimeout:  2 * time.Second,
		Logger:            testLogger(t),
	}
}

// testLogger writes the edge's log to the test's (shown when it fails, or
// with -v), so that a failure says what the edge did: a session it closed,
// a store call that failed. Lines after the test's end are dropped
// (testing forbids them).
func testLogger(t testing.TB) *slog.Logger {
	w := &testLog{t: t}
	t.Cleanup(w.end)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testLog struct {
	t     testing.TB
	mu    sync.Mutex
	ended bool
}

func (w *testLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended {
		w.t.Log("edge: " + strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testLog) end() {
	w.mu.Lock()
	w.ended = true
	w.mu.Unlock()
}

// Start starts an edge with cfg in the test's process and closes
// it when the test ends.
func Start(t testing.TB, cfg server.Config) *server.Edge {
	t.Helper()
	e, err := server.New(cfg)
	if err != nil {
		t.Fatalf("starting the edge: %v", err)
	}
	if err := e.Start(context.Background()); err != nil {
		_ = e.Close()
		t.Fatalf("starting the edge: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// Client makes an API key named name with scopes on e and returns
// it with a client that pins the API's certificate, as the operator does.
func Client(t testing.TB, e *server.Edge, name string, scopes ...string) (*client.Client, string) {
	t.Helper()
	key, err := e.CreateAPIKey(name, scopes)
	if err != nil {
		t.Fatalf("an API key for %s: %v", name, err)
	}
	return client.New(e.APIURL(), key, client.WithTrust(client.Trust{Fingerprint: e.APIFingerprint()})), key
}
