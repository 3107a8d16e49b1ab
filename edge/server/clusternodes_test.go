package server_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
)

func addrsOf(nodes []protocol.Node) string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.SSHAddr)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func sshAddrs(t *testing.T, ns ...*testEdge) string {
	var out []string
	for _, n := range ns {
		out = append(out, n.info(t).SSHAddr)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// nextNodes waits for the next node list the edge sends over s.
func nextNodes(t *testing.T, s *tunnelclient.Session) protocol.NodeList {
	t.Helper()
	select {
	case l := <-s.Nodes():
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("no node list within 10s")
	}
	return protocol.NodeList{}
}

// A session learns the cluster's nodes from its bind reply and hears of
// every change of the set over the session itself: its tunnel key cannot
// call the control API to ask.
func TestClusterTellsSessionsItsNodes(t *testing.T) {
	c := startCluster(t, 2)
	a := c.nodes[0]
	tk := a.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "app." + baseDomain})
	if _, err := a.client(tk.Key).Nodes(t.Context()); err == nil {
		t.Fatal("a tunnel key listed the nodes through the control API")
	}
	waitFor(t, "both nodes listed", func() bool {
		ns, err := a.client(a.writeKey).Nodes(t.Context())
		return err == nil && len(ns) == 2
	})
	s := a.mustDial(t, tk.Key)
	first := bind(t, s, protocol.BindRequest{Protocol: "http", Subdomain: "app"})
	if first.Nodes == nil {
		t.Fatal("a cluster node's bind reply lists no nodes")
	}
	cur := *first.Nodes
	if addrsOf(cur.Nodes) != sshAddrs(t, c.nodes...) {
		// The node's record reached the mirror before the sessions were
		// told: the change follows.
		cur = nextNodes(t, s)
	}
	if got, want := addrsOf(cur.Nodes), sshAddrs(t, c.nodes...); got != want || cur.Version == 0 {
		t.Fatalf("bind reply lists %q (version %d), want %q", got, cur.Version, want)
	}
	ids := map[string]string{}
	for _, n := range cur.Nodes {
		if n.ID == "" {
			t.Fatalf("a node without a run ID: %+v", n)
		}
		ids[n.SSHAddr] = n.ID
	}

	joined := c.start(t, 2)
	l := nextNodes(t, s)
	if got, want := addrsOf(l.Nodes), sshAddrs(t, a, c.nodes[1], joined); got != want || l.Version <= cur.Version {
		t.Fatalf("after a join: %q (version %d), want %q after version %d", got, l.Version, want, cur.Version)
	}
	leaving := c.nodes[1].info(t).SSHAddr
	if err := c.nodes[1].Close(); err != nil {
		t.Fatal(err)
	}
	l = nextNodes(t, s)
	if got, want := addrsOf(l.Nodes), sshAddrs(t, a, joined); got != want {
		t.Fatalf("after a node stopped: %q, want %q (%s gone)", got, want, leaving)
	}
	for _, n := range l.Nodes {
		if old, ok := ids[n.SSHAddr]; ok && old != n.ID {
			t.Fatalf("node %s changed its run ID without a restart: %s → %s", n.SSHAddr, old, n.ID)
		}
	}
	// The session still serves while it is told: lists change nothing of
	// what it carries.
	serveHTTP(t, s, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("up")) }))
	if code, body, _ := a.get(t, "app."+baseDomain, "/", nil); code != http.StatusOK || body != "up" {
		t.Fatalf("through the node: %d %q", code, body)
	}

	// A single edge lists no nodes: its agents keep the one session.
	one := startEdge(t, t.TempDir())
	otk := one.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "solo." + baseDomain})
	if r := bind(t, one.mustDial(t, otk.Key), protocol.BindRequest{Protocol: "http", Subdomain: "solo"}); r.Nodes != nil {
		t.Fatalf("a single edge listed nodes: %+v", *r.Nodes)
	}
}
