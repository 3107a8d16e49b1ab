package session

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// These tests drive the node-following rules of nodes.go on a real Tunnel
// whose links dial closed loopback ports: every dial is refused, and a link
// is marked connected by hand, as once() does after a bind. The edge's side
// (lists in bind replies, pushed changes) is tested in edge/server and,
// with the operator, in tests/e2e/cluster.

// refusingTunnel starts a tunnel whose given address refuses, with a
// backoff long enough that no link retries during a test.
func refusingTunnel(t *testing.T) (*Tunnel, string) {
	t.Helper()
	given := ports.Addr(t)
	tun := Start(Config{Edge: tunnelclient.Config{Addr: given, Key: "tk_unused"}, Bind: protocol.BindRequest{Protocol: "http"}},
		Traffic{}, Backoff{Initial: time.Hour, Max: time.Hour}, Hooks{}, logr.Discard(), nil)
	t.Cleanup(tun.Stop)
	return tun, given
}

// settled waits until every link's first dial was refused, so that a state
// set by the test is not overwritten by it.
func settled(t *testing.T, tun *Tunnel) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tun.mu.Lock()
		done := true
		for _, l := range tun.byAddr {
			done = done && l.state.Reason != "Connecting" // refused, or connected by the test
		}
		tun.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the links' dials were not refused within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// connect marks the link to addr connected, as a bind does, and returns it.
func connect(t *testing.T, tun *Tunnel, addr string) *link {
	t.Helper()
	tun.mu.Lock()
	l := tun.byAddr[addr]
	tun.mu.Unlock()
	if l == nil {
		t.Fatalf("no link to %s", addr)
	}
	tun.setLinkState(l, State{Phase: PhaseConnected, URL: "http://app.tuna.localhost", Reason: "Connected"})
	return l
}

func linkAddrs(tun *Tunnel) string {
	tun.mu.Lock()
	defer tun.mu.Unlock()
	var out []string
	for a := range tun.byAddr {
		out = append(out, a)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func sorted(addrs ...string) string {
	slices.Sort(addrs)
	return strings.Join(addrs, ",")
}

func list(version uint64, nodes ...protocol.Node) protocol.NodeList {
	return protocol.NodeList{Nodes: nodes, Version: version}
}

func TestTunnelFollowsTheNodeLists(t *testing.T) {
	tun, given := refusingTunnel(t)
	b, c := ports.Addr(t), ports.Addr(t)
	settled(t, tun)
	first := connect(t, tun, given)

	tun.observe(first, list(1, protocol.Node{SSHAddr: given, ID: "a@1"}, protocol.Node{SSHAddr: b, ID: "b@1"}))
	if got, want := linkAddrs(tun), sorted(given, b); got != want {
		t.Fatalf("after a list of two nodes: links %s, want %s", got, want)
	}

	tun.observe(first, list(2, protocol.Node{SSHAddr: given, ID: "a@1"}, protocol.Node{SSHAddr: c, ID: "c@1"}))
	if got, want := linkAddrs(tun), sorted(given, c); got != want {
		t.Fatalf("after b left the list: links %s, want %s", got, want)
	}

	tun.observe(first, list(1, protocol.Node{SSHAddr: given, ID: "a@1"}, protocol.Node{SSHAddr: b, ID: "b@1"}))
	if got, want := linkAddrs(tun), sorted(given, c); got != want {
		t.Fatalf("a stale list (an older version) changed the links: %s, want %s", got, want)
	}

	settled(t, tun)
	tun.mu.Lock()
	old := tun.byAddr[c]
	tun.mu.Unlock()
	tun.observe(first, list(3, protocol.Node{SSHAddr: given, ID: "a@1"}, protocol.Node{SSHAddr: c, ID: "c@2"}))
	tun.mu.Lock()
	restarted := tun.byAddr[c]
	tun.mu.Unlock()
	if restarted == nil || restarted == old || restarted.id != "c@2" {
		t.Fatalf("a node that restarted while its link backed off was not dialled again at once: old %p, new %+v", old, restarted)
	}

	tun.observe(first, list(4))
	if got, want := linkAddrs(tun), sorted(given, c); got != want {
		t.Fatalf("an empty list changed the links: %s, want %s", got, want)
	}
}

// The address the agent was given may be a load balancer in front of the
// nodes: its link stays until a listed node serves the tunnel, and it is
// dialled again when no link is connected.
func TestTunnelKeepsTheGivenAddressUntilANodeServes(t *testing.T) {
	tun, given := refusingTunnel(t)
	b, c := ports.Addr(t), ports.Addr(t)
	settled(t, tun)
	lb := connect(t, tun, given)

	tun.observe(lb, list(1, protocol.Node{SSHAddr: b, ID: "b@1"}, protocol.Node{SSHAddr: c, ID: "c@1"}))
	if got, want := linkAddrs(tun), sorted(given, b, c); got != want {
		t.Fatalf("the given address was dropped before a listed node served: links %s, want %s", got, want)
	}
	if s := tun.State(); s.Phase != PhaseConnected || s.Sessions != 1 {
		t.Fatalf("state %+v, want connected through one session", s)
	}

	settled(t, tun)
	nb := connect(t, tun, b)
	tun.observe(nb, list(1, protocol.Node{SSHAddr: b, ID: "b@1"}, protocol.Node{SSHAddr: c, ID: "c@1"}))
	if got, want := linkAddrs(tun), sorted(b, c); got != want {
		t.Fatalf("once a listed node served: links %s, want %s", got, want)
	}

	tun.setLinkState(nb, State{Phase: PhaseConnecting, Reason: "EdgeUnreachable", Message: "refused"})
	if got, want := linkAddrs(tun), sorted(given, b, c); got != want {
		t.Fatalf("with no link connected the given address was not dialled again: links %s, want %s", got, want)
	}
	if s := tun.State(); s.Phase == PhaseConnected {
		t.Fatalf("state %+v with no link connected", s)
	}
}
