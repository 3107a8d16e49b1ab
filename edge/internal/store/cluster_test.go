package store

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/tests/etcdcluster"
)

// Tests of what only a shared store does: several nodes on one etcd.

// nodes opens n stores on one fresh prefix, as n edge nodes would.
func nodes(t *testing.T, n int) []*Store {
	t.Helper()
	prefix := fmt.Sprintf("/test/nodes-%d/", prefixN.Add(1))
	var out []*Store
	for range n {
		s, err := OpenEtcd(etcdConfig(t, prefix))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		out = append(out, s)
	}
	return out
}

// race runs fn on every store at the same moment and returns the errors.
func race(stores []*Store, fn func(i int, s *Store) error) []error {
	errs := make([]error, len(stores))
	var start, wg sync.WaitGroup
	start.Add(1)
	for i, s := range stores {
		wg.Go(func() {
			start.Wait()
			errs[i] = fn(i, s)
		})
	}
	start.Done()
	wg.Wait()
	return errs
}

func TestReservationsAreUniqueAcrossNodes(t *testing.T) {
	for round := range 10 {
		ss := nodes(t, 3)
		name := fmt.Sprintf("r%d.tuna.example", round)
		errs := race(ss, func(i int, s *Store) error {
			return s.CreateDomain(Domain{Name: name, Ownership: Ownership{Owner: fmt.Sprintf("c/%d", i)}})
		})
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, ErrExists):
				t.Fatalf("round %d: a losing node got %v, want ErrExists", round, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d nodes reserved %s, want exactly 1 (%v)", round, won, name, errs)
		}

		// Claims of a bare subdomain: one owner wins, the others are
		// refused by owner.
		claimed := fmt.Sprintf("c%d.tuna.example", round)
		errs = race(ss, func(i int, s *Store) error {
			return s.IssueTunnelKey(TunnelKey{ID: fmt.Sprintf("k%d", i), Protocol: "http", Address: claimed, Owner: fmt.Sprintf("c/%d", i)}, true)
		})
		won = 0
		for _, err := range errs {
			var owned *OwnedError
			switch {
			case err == nil:
				won++
			case !errors.As(err, &owned):
				t.Fatalf("round %d: a losing claim got %v, want *OwnedError", round, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d owners claimed %s, want exactly 1 (%v)", round, won, claimed, errs)
		}

		// Ports: each node picks the lowest free one, none is handed out twice.
		errs = race(ss, func(i int, s *Store) error {
			_, err := s.CreateTCPEndpoint(TCPEndpoint{Alias: fmt.Sprintf("e%d", i)}, lowestFree(100, 199))
			return err
		})
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		eps, err := ss[0].ListTCPEndpoints()
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for _, e := range eps {
			if seen[e.Port] {
				t.Fatalf("round %d: port %d handed out twice: %+v", round, e.Port, eps)
			}
			seen[e.Port] = true
		}
		if len(seen) != 3 {
			t.Fatalf("round %d: %d endpoints, want 3", round, len(seen))
		}
	}
}

// await polls cond until it holds or a deadline passes.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestChangesReachEveryNode(t *testing.T) {
	ss := nodes(t, 3)
	var mu sync.Mutex
	seen := map[int][]Change{}
	for i, s := range ss[1:] {
		s.OnChange(func(c Change) {
			mu.Lock()
			seen[i+1] = append(seen[i+1], c)
			mu.Unlock()
		})
	}
	find := func(node int, kind Kind, name string, deleted bool) *Change {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range seen[node] {
			if c.Kind == kind && c.Name == name && (c.Next == nil) == deleted {
				return &c
			}
		}
		return nil
	}
	a := ss[0]
	const host = "app.tuna.example"
	if err := a.IssueTunnelKey(TunnelKey{ID: "t1", Protocol: "http", Address: host, Owner: "c/a"}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateTCPEndpoint(TCPEndpoint{Alias: "db"}, lowestFree(300, 399)); err != nil {
		t.Fatal(err)
	}
	if err := a.CreateDomain(Domain{Name: "www.example.org", Custom: true}); err != nil {
		t.Fatal(err)
	}
	for _, node := range []int{1, 2} {
		await(t, "the new key on every node", func() bool { return find(node, KindTunnelKey, "t1", false) != nil })
		await(t, "the new endpoint on every node", func() bool { return find(node, KindTCPEndpoint, "db", false) != nil })
		if got := ss[node].Host(host); got.Keys != 1 {
			t.Fatalf("node %d: Host(%s) = %+v, want 1 key", node, host, got)
		}
		await(t, "the domain in every node's index", func() bool { return ss[node].Host("www.example.org").Reserved })
	}

	// A revocation on node A reaches B and C with the revoked key, and a
	// deleted endpoint with its port.
	if _, err := a.RevokeTunnelKey("t1"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.DeleteTCPEndpoint("db", nil); err != nil {
		t.Fatal(err)
	}
	for _, node := range []int{1, 2} {
		await(t, "the revocation on every node", func() bool { return find(node, KindTunnelKey, "t1", true) != nil })
		c := find(node, KindTunnelKey, "t1", true)
		if k, ok := c.Prev.(*TunnelKey); !ok || k.Owner != "c/a" {
			t.Fatalf("node %d: revocation's previous record = %#v", node, c.Prev)
		}
		await(t, "the endpoint's deletion on every node", func() bool { return find(node, KindTCPEndpoint, "db", true) != nil })
		if e, ok := find(node, KindTCPEndpoint, "db", true).Prev.(*TCPEndpoint); !ok || e.Port != 300 {
			t.Fatalf("node %d: deleted endpoint's previous record = %#v", node, e)
		}
		if got := ss[node].Host(host); got.Keys != 0 {
			t.Fatalf("node %d: Host(%s) = %+v after revocation", node, host, got)
		}
	}
}

func TestNodesComeAndGo(t *testing.T) {
	ss := nodes(t, 2)
	m, err := ss[0].Join(Node{Name: "a", SSHAddr: "127.0.0.1:1"}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	names := func(s *Store) string {
		ns, err := s.Nodes()
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, n := range ns {
			out += n.Name
			if n.Draining {
				out += "(draining)"
			}
		}
		return out
	}
	await(t, "node a on the other node", func() bool { return names(ss[1]) == "a" })
	m.Set(func(n *Node) { n.Draining = true })
	await(t, "node a draining on the other node", func() bool { return names(ss[1]) == "a(draining)" })
	m.Leave()
	await(t, "node a gone after Leave", func() bool { return names(ss[1]) == "" })

	// A node that stops renewing (killed) drops out when its lease expires.
	b, err := OpenEtcd(etcdConfig(t, ss[0].etcd.prefix))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Join(Node{Name: "b"}, time.Second); err != nil {
		t.Fatal(err)
	}
	await(t, "node b listed", func() bool { return names(ss[1]) == "b" })
	b.etcd.w.stop()
	_ = b.etcd.c.Close() // no Leave: the lease is left to expire
	await(t, "node b gone when its lease expired", func() bool { return names(ss[1]) == "" })

	if _, err := (&Store{}).Nodes(); !errors.Is(err, ErrNotShared) {
		t.Fatalf("Nodes of a bbolt store: %v", err)
	}
}

func TestClaimIdentity(t *testing.T) {
	ss := nodes(t, 2)
	got, err := ss[0].ClaimIdentity("ssh_host_key", "key-a")
	if err != nil || got != "key-a" {
		t.Fatalf("first claim: %q %v", got, err)
	}
	if got, err = ss[1].ClaimIdentity("ssh_host_key", "key-b"); err != nil || got != "key-a" {
		t.Fatalf("second claim: %q %v, want the first node's key-a", got, err)
	}
}

// TestQuorumLoss takes two of three members away: writes and reads fail
// with ErrUnavailable within the request timeout (the API's 503), what
// this node serves from memory (host index) still answers, and once
// quorum is back both nodes write and follow again.
func TestQuorumLoss(t *testing.T) {
	c, err := etcdcluster.Start(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := EtcdConfig{Endpoints: c.Endpoints(), OpTimeout: 2 * time.Second}
	a, err := OpenEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := a.CreateTunnelKey(TunnelKey{ID: "t1", Protocol: "http", Address: "app.tuna.example"}); err != nil {
		t.Fatal(err)
	}
	await(t, "the key on node b", func() bool { return b.Host("app.tuna.example").Keys == 1 })

	c.Stop(1)
	c.Stop(2)
	start := time.Now()
	err = a.CreateDomain(Domain{Name: "x.tuna.example"})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("write without quorum: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("write without quorum took %s to fail", d)
	}
	if _, err := b.GetTunnelKey("t1"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("read without quorum: %v, want ErrUnavailable", err)
	}
	if got := b.Host("app.tuna.example"); got.Keys != 1 {
		t.Fatalf("host index without quorum: %+v", got)
	}

	for _, i := range []int{1, 2} {
		if err := c.Restart(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitHealthy(time.Minute); err != nil {
		t.Fatal(err)
	}
	await(t, "writes again after quorum is back", func() bool {
		return a.CreateDomain(Domain{Name: "x.tuna.example"}) == nil
	})
	await(t, "node b follows again", func() bool { return b.Host("x.tuna.example").Reserved })
}

// TestEtcdTLSClientCertificates: a cluster that requires client
// certificates admits the store with its certificate, and refuses it
// without one or with one of another CA.
func TestEtcdTLSClientCertificates(t *testing.T) {
	c, err := etcdcluster.Start(t.TempDir(), 1, etcdcluster.Options{TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f := c.TLS
	good := EtcdConfig{Endpoints: c.Endpoints(), CAFile: f.CA, CertFile: f.ClientCert, KeyFile: f.ClientKey, OpTimeout: 5 * time.Second}
	s, err := OpenEtcd(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateDomain(Domain{Name: "tls.tuna.example"}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()

	for _, tc := range []struct {
		name   string
		mutate func(*EtcdConfig)
	}{
		{"no client certificate", func(c *EtcdConfig) { c.CertFile, c.KeyFile = "", "" }},
		{"a certificate of another CA", func(c *EtcdConfig) { c.CertFile, c.KeyFile = f.OtherClientCert, f.OtherClientKey }},
		{"the members' CA not trusted", func(c *EtcdConfig) { c.CAFile = "" }},
	} {
		cfg := good
		cfg.OpTimeout = 2 * time.Second
		tc.mutate(&cfg)
		s, err := OpenEtcd(cfg)
		if err == nil {
			_ = s.Close()
			t.Fatalf("%s: the store opened", tc.name)
		}
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "loading the edge's state from https://127.0.0.1") {
			t.Fatalf("%s: %v", tc.name, err)
		}
	}
	if _, err := OpenEtcd(EtcdConfig{Endpoints: c.Endpoints(), CertFile: f.ClientCert}); err == nil || !strings.Contains(err.Error(), "set both") {
		t.Fatalf("certificate without key: %v", err)
	}
}
