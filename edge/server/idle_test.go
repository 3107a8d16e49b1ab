package server_test

import (
	"bytes"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
)

// edgeSessionGoroutines counts the goroutines that the edge's session
// code (package sshd) started with a function of its own, whatever
// x/crypto/ssh starts for the connections.
func edgeSessionGoroutines(t *testing.T) int {
	t.Helper()
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 2); err != nil {
		t.Fatal(err)
	}
	n := 0
	for g := range strings.SplitSeq(b.String(), "\n\n") {
		lines := strings.Split(g, "\n")
		for i, l := range lines {
			// The goroutine's own function is the last frame, just
			// before "created by" and its file line.
			if strings.HasPrefix(l, "created by ") && i >= 2 && strings.Contains(lines[i-2], "/edge/internal/sshd.") {
				n++
			}
		}
	}
	return n
}

// An idle session costs the edge no goroutine of its own: its requests
// are waited on by a watcher shared with other sessions, and served (in
// order) on a goroutine only while there are some. Sixty-five bound
// sessions, idle, leave two watchers and the accept loop; each still
// answers a request (a bind) after they are idle.
func TestIdleSessionsCostNoGoroutineOfTheEdge(t *testing.T) {
	// Keepalives only once an hour, either way: the goroutine counted is
	// the idle session's, not a ping's in flight.
	e := startEdge(t, t.TempDir(), func(c *server.Config) { c.KeepaliveInterval = time.Hour })
	info := e.info(t)
	before := edgeSessionGoroutines(t)
	const n = 65
	batch := make([]apiwire.CreateTunnelKey, n)
	for i := range batch {
		batch[i] = apiwire.CreateTunnelKey{Protocol: "http", Address: "idle" + strconv.Itoa(i)}
	}
	issued, err := e.client(e.writeKey).CreateTunnelKeys(t.Context(), batch)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range issued {
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, r.Key.Key)
	}
	for i, key := range keys {
		s, err := tunnelclient.Dial(t.Context(), tunnelclient.Config{Addr: info.SSHAddr, Key: key, HostKey: info.SSHHostKey, KeepaliveInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		bind(t, s, protocol.BindRequest{Protocol: "http"})
		if i == n-1 {
			// Served after the others went idle: a request still
			// reaches its session.
			waitFor(t, "the sessions to be idle", func() bool { return edgeSessionGoroutines(t) <= before+2 })
			bind(t, s, protocol.BindRequest{Protocol: "http"})
		}
	}
	waitFor(t, "the sessions to register", func() bool { return len(e.ActiveSessions()) == n })
	waitFor(t, "the sessions to be idle", func() bool { return edgeSessionGoroutines(t) <= before+2 })
}
