package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/secrets"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	"code.tuna.am/tuna/k8s-operator/tests/etcdcluster"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// A cluster in tests: a real three-member etcd, and edge nodes in this
// process, each on its own loopback address for TCP endpoints (every node
// binds a reserved port, as separate machines would) and its own data dir.

type testCluster struct {
	etcd  *etcdcluster.Cluster
	keys  string // the files every node shares
	nodes []*testEdge
}

func startCluster(t testing.TB, nodes int, mutate ...func(*server.Config)) *testCluster {
	t.Helper()
	ec, err := etcdcluster.Start(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ec.Close)
	c := &testCluster{etcd: ec, keys: clusterKeys(t)}
	tcpRange := [2]int{}
	for i := range nodes {
		n := c.start(t, i, func(cfg *server.Config) {
			// One range for all nodes: a TCP endpoint has one port, held on
			// each node's own address.
			if tcpRange == [2]int{} {
				tcpRange = cfg.TCPPortRange
			}
			cfg.TCPPortRange = tcpRange
			for _, m := range mutate {
				m(cfg)
			}
		})
		c.nodes = append(c.nodes, n)
	}
	return c
}

// start runs node i of the cluster.
func (c *testCluster) start(t testing.TB, i int, mutate ...func(*server.Config)) *testEdge {
	t.Helper()
	return startEdge(t, t.TempDir(), func(cfg *server.Config) {
		// The default request limit: a write while the members elect a new
		// leader (one member lost) waits for it rather than failing.
		cfg.Etcd = store.EtcdConfig{Endpoints: c.etcd.Endpoints(), OpTimeout: 5 * time.Second}
		cfg.NodeName = "node-" + strconv.Itoa(i)
		cfg.NodeTTL = time.Second
		cfg.HostKeyFile = filepath.Join(c.keys, "ssh_host_ed25519_key")
		cfg.SecretsKeyFile = filepath.Join(c.keys, "secrets.key")
		cfg.APITLSCert = filepath.Join(c.keys, "api.crt")
		cfg.APITLSKey = filepath.Join(c.keys, "api.key")
		cfg.TCPListenHost = "127.0.0." + strconv.Itoa(i+2)
		cfg.PublicTCPHost = cfg.TCPListenHost
		for _, m := range mutate {
			m(cfg)
		}
	})
}

// clusterKeys writes what every node shares: the SSH host key, the secrets
// key and the API certificate.
func clusterKeys(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := server.GenerateHostKeyFile(filepath.Join(dir, "ssh_host_ed25519_key")); err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.GenerateKeyFile(filepath.Join(dir, "secrets.key")); err != nil {
		t.Fatal(err)
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tuna-edge cluster"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("api.crt", "CERTIFICATE", der)
	write("api.key", "EC PRIVATE KEY", keyDER)
	return dir
}

// rawPost sends a JSON body to a node's API and returns the status and the
// decoded answer.
func rawPost(t *testing.T, e *testEdge, hc *http.Client, path, body string) (int, apiwire.APIError) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.APIURL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.writeKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out apiwire.APIError
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s: answer %d is not the JSON error shape: %q", path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, out
}

func TestClusterSameSubdomainAtOnce(t *testing.T) {
	c := startCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	hcs := []*http.Client{a.apiHTTP(t), b.apiHTTP(t)}
	for round := range 10 {
		body := `{"subdomain":"race` + strconv.Itoa(round) + `"}`
		type res struct {
			status int
			err    apiwire.APIError
		}
		out := make([]res, 2)
		var start, wg sync.WaitGroup
		start.Add(1)
		for i, n := range []*testEdge{a, b} {
			wg.Go(func() {
				start.Wait()
				s, e := rawPost(t, n, hcs[i], "/v1/domains", body)
				out[i] = res{s, e}
			})
		}
		start.Done()
		wg.Wait()
		created, conflict := 0, 0
		for _, r := range out {
			switch r.status {
			case http.StatusCreated:
				created++
			case http.StatusConflict:
				conflict++
				if r.err.Code != apiwire.CodeNameTaken || r.err.RequestID == "" || !strings.Contains(r.err.Message, "already reserved") {
					t.Fatalf("round %d: conflict answer %+v, want name_taken with a request id", round, r.err)
				}
			default:
				t.Fatalf("round %d: status %d (%+v)", round, r.status, r.err)
			}
		}
		if created != 1 || conflict != 1 {
			t.Fatalf("round %d: %d created, %d conflicts; want exactly one of each", round, created, conflict)
		}
	}
}

func TestClusterRevocationEndsSessionsOnEveryNode(t *testing.T) {
	c := startCluster(t, 3)
	a := c.nodes[0]
	tk := a.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "app." + baseDomain})
	// The same host key everywhere: one pin reaches every node.
	pin := a.info(t).SSHHostKey
	for _, n := range c.nodes[1:] {
		if got := n.info(t).SSHHostKey; got != pin {
			t.Fatalf("node host keys differ: %s vs %s", got, pin)
		}
	}
	var sessions = c.nodes[1:]
	var live []func() error
	for _, n := range sessions {
		s := n.mustDial(t, tk.Key)
		bind(t, s, protocol.BindRequest{Protocol: "http", Subdomain: "app"})
		serveHTTP(t, s, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "up") }))
		if code, body, _ := n.get(t, "app."+baseDomain, "/", nil); code != http.StatusOK || body != "up" {
			t.Fatalf("through %s before revocation: %d %q", n.cfg.NodeName, code, body)
		}
		live = append(live, func() error { return waitDone(t, s) })
	}
	if err := a.client(a.writeKey).RevokeTunnelKey(context.Background(), tk.ID); err != nil {
		t.Fatal(err)
	}
	for i, done := range live {
		te := asTerminated(done())
		if te == nil || te.Code != protocol.CodeKeyRevoked {
			t.Fatalf("session on %s ended with %v, want key_revoked", sessions[i].cfg.NodeName, te)
		}
	}
	for _, n := range c.nodes {
		waitFor(t, "the host unknown on "+n.cfg.NodeName, func() bool {
			code, _, _ := n.get(t, "app."+baseDomain, "/", nil)
			return code == http.StatusNotFound
		})
	}
}

func TestClusterTCPEndpointHasOnePortOnEveryNode(t *testing.T) {
	c := startCluster(t, 3)
	a := c.nodes[0]
	ep, err := a.client(a.writeKey).CreateTCPEndpoint(context.Background(), apiwire.CreateTCPEndpoint{Alias: "db"})
	if err != nil {
		t.Fatal(err)
	}
	tk := a.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "tcp", Address: "db"})
	for _, n := range c.nodes {
		s := n.mustDial(t, tk.Key)
		r := bind(t, s, protocol.BindRequest{Protocol: "tcp", Alias: "db"})
		want := "tcp://" + net.JoinHostPort(n.cfg.TCPListenHost, strconv.Itoa(ep.Port))
		if r.URL != want {
			t.Fatalf("%s: bound at %s, want %s", n.cfg.NodeName, r.URL, want)
		}
		name := n.cfg.NodeName
		go func() {
			for {
				conn, err := s.Accept()
				if err != nil {
					return
				}
				_, _ = io.WriteString(conn, name)
				_ = conn.Close()
			}
		}()
	}
	for _, n := range c.nodes {
		conn, err := net.Dial("tcp", net.JoinHostPort(n.cfg.TCPListenHost, strconv.Itoa(ep.Port)))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(conn)
		_ = conn.Close()
		if string(got) != n.cfg.NodeName {
			t.Fatalf("port %d on %s answered %q: each node routes to its own session", ep.Port, n.cfg.TCPListenHost, got)
		}
	}

	// Deleted through another node: every node lets the port go.
	if err := c.nodes[1].client(c.nodes[1].writeKey).DeleteTCPEndpoint(context.Background(), "db", ""); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		addr := net.JoinHostPort(n.cfg.TCPListenHost, strconv.Itoa(ep.Port))
		waitFor(t, "port released on "+n.cfg.NodeName, func() bool {
			ln, err := net.Listen("tcp", addr)
			if err == nil {
				_ = ln.Close()
			}
			return err == nil
		})
	}
}

func TestClusterListsItsNodes(t *testing.T) {
	c := startCluster(t, 3)
	names := func(n *testEdge) (string, string) {
		ns, err := n.client(n.writeKey).Nodes(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var all, self []string
		for _, x := range ns {
			all = append(all, x.Name)
			if x.Self {
				self = append(self, x.Name)
			}
			if x.SSHAddr == "" || x.APIURL == "" || x.HTTPURL == "" {
				t.Fatalf("node record without addresses: %+v", x)
			}
		}
		return strings.Join(all, ","), strings.Join(self, ",")
	}
	// Each node lists from its mirror of etcd, which its watch fills in
	// after start: every node comes to list all three, itself marked.
	for _, n := range c.nodes {
		waitFor(t, n.cfg.NodeName+" listing every node", func() bool {
			all, self := names(n)
			return all == "node-0,node-1,node-2" && self == n.cfg.NodeName
		})
	}
	if err := c.nodes[2].Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a stopped node off the list", func() bool { all, _ := names(c.nodes[0]); return all == "node-0,node-1" })

	// A single edge is one node.
	one := startEdge(t, t.TempDir(), func(cfg *server.Config) { cfg.NodeName = "solo" })
	ns, err := one.client(one.writeKey).Nodes(context.Background())
	if err != nil || len(ns) != 1 || ns[0].Name != "solo" || !ns[0].Self || ns[0].SSHAddr != one.info(t).SSHAddr {
		t.Fatalf("single edge's nodes: %+v %v", ns, err)
	}
}

func TestClusterWithoutQuorumRefusesWritesAndKeepsServing(t *testing.T) {
	c := startCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	tk := a.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "app." + baseDomain})
	s := b.mustDial(t, tk.Key)
	bind(t, s, protocol.BindRequest{Protocol: "http", Subdomain: "app"})
	serveHTTP(t, s, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "up") }))
	// A session that logs in now and binds only once quorum is lost. The
	// bind waits for the store (5 s), longer than the helper's keepalive
	// timeout (2 s): the session stays up meanwhile.
	lateKey := a.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "late." + baseDomain})
	late := b.mustDial(t, lateKey.Key)

	// One member away: nothing visible changes.
	c.etcd.Stop(2)
	if _, err := a.client(a.writeKey).CreateDomain(context.Background(), apiwire.CreateDomain{Subdomain: "one-down"}); err != nil {
		t.Fatalf("write with one member down: %v", err)
	}

	// Two away: writes are refused with 503 state_unavailable.
	c.etcd.Stop(1)
	hc := a.apiHTTP(t)
	status, apiErr := rawPost(t, a, hc, "/v1/domains", `{"subdomain":"two-down"}`)
	if status != http.StatusServiceUnavailable || apiErr.Code != apiwire.CodeStateUnavailable || apiErr.RequestID == "" ||
		!strings.Contains(apiErr.Message, "established tunnels keep serving") {
		t.Fatalf("write without quorum: %d %+v, want 503 state_unavailable", status, apiErr)
	}
	// The established tunnel serves on, through its node.
	for range 20 {
		if code, body, _ := b.get(t, "app."+baseDomain, "/", nil); code != http.StatusOK || body != "up" {
			t.Fatalf("tunnel without quorum: %d %q", code, body)
		}
	}
	select {
	case <-s.Done():
		t.Fatalf("the session ended without quorum: %v", s.Err())
	default:
	}
	// A new login cannot check its key: refused as retryable, not revoked.
	_, err := tunnelclient.Dial(context.Background(), tunnelclient.Config{Addr: a.SSHAddr(), Key: tk.Key, HostKey: a.HostKey()})
	var ae *tunnelclient.AuthError
	if !errors.As(err, &ae) || ae.Code != protocol.CodeStateUnavailable {
		t.Fatalf("login without quorum: %v, want a state_unavailable refusal", err)
	}
	// A bind cannot check its address's owner: refused as retryable too,
	// not as a bad request.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = late.Bind(ctx, protocol.BindRequest{Protocol: "http", Subdomain: "late"})
	var be *tunnelclient.BindError
	if !errors.As(err, &be) || be.Code != protocol.CodeStateUnavailable {
		t.Fatalf("bind without quorum: %v, want a state_unavailable refusal", err)
	}
	// The refused write failed on its transaction's first read.
	if metric := scrape(t, a, `tuna_edge_store_errors_total{op="read"}`); metric == "" || strings.HasSuffix(metric, " 0") {
		t.Fatalf("store errors not counted: %q", metric)
	}

	// Quorum back: writes work again.
	for _, i := range []int{1, 2} {
		if err := c.etcd.Restart(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.etcd.WaitHealthy(time.Minute); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "writes after quorum is back", func() bool {
		status, _ := rawPost(t, a, hc, "/v1/domains", `{"subdomain":"two-down"}`)
		return status == http.StatusCreated
	})
	for _, name := range []string{"tuna_edge_store_request_duration_seconds_count", "tuna_edge_store_watch_lag_seconds_count"} {
		got := scrape(t, a, name)
		if got == "" || strings.HasSuffix(strings.TrimSpace(got), " 0") {
			t.Fatalf("%s not recorded: %q", name, got)
		}
	}
}

// scrape returns the lines of a node's /metrics that start with name.
func scrape(t *testing.T, e *testEdge, name string) string {
	t.Helper()
	resp, err := e.apiHTTP(t).Get(e.APIURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestClusterNodeRefusals(t *testing.T) {
	ec, err := etcdcluster.Start(t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	keys := clusterKeys(t)
	base := func() server.Config {
		return server.Config{
			DataDir: t.TempDir(), BaseDomain: baseDomain, APIListen: ports.Addr(t), SSHListen: ports.Addr(t), HTTPListen: ports.Addr(t),
			Etcd:           store.EtcdConfig{Endpoints: ec.Endpoints()},
			HostKeyFile:    filepath.Join(keys, "ssh_host_ed25519_key"),
			SecretsKeyFile: filepath.Join(keys, "secrets.key"),
			APITLSCert:     filepath.Join(keys, "api.crt"), APITLSKey: filepath.Join(keys, "api.key"),
		}
	}
	other := t.TempDir()
	if err := server.GenerateHostKeyFile(filepath.Join(other, "key")); err != nil {
		t.Fatal(err)
	}
	first, err := server.New(base())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	cases := []struct {
		name   string
		mutate func(*server.Config)
		want   string
	}{
		{"no host key file", func(c *server.Config) { c.HostKeyFile = filepath.Join(t.TempDir(), "none") }, "tuna-edge cluster-keys"},
		{"no secrets key", func(c *server.Config) { c.SecretsKeyFile = "" }, "same --secrets-key-file"},
		{"no API certificate", func(c *server.Config) { c.APITLSCert, c.APITLSKey = "", "" }, "same --api-tls-cert"},
		{"another host key", func(c *server.Config) { c.HostKeyFile = filepath.Join(other, "key") }, "is not the cluster's"},
	}
	for _, tc := range cases {
		cfg := base()
		tc.mutate(&cfg)
		e, err := server.New(cfg)
		if err == nil {
			_ = e.Close()
			t.Fatalf("%s: node started", tc.name)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: %v, want it to say %q", tc.name, err, tc.want)
		}
	}
}

// TestClusterStateHoldsNoKeyMaterial reads every key the edge wrote to
// etcd: a secret's value (in clear or base64), the secrets key, the SSH
// host private key and API key secrets are nowhere; the host key's public
// half is (the identity every node checks).
func TestClusterStateHoldsNoKeyMaterial(t *testing.T) {
	c := startCluster(t, 1)
	n := c.nodes[0]
	const value = "correct-horse-battery-staple"
	if _, err := n.client(n.fullKey).PutSecret(context.Background(), "team/db", apiwire.PutSecret{Data: map[string][]byte{"password": []byte(value)}}); err != nil {
		t.Fatal(err)
	}
	tk := n.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "app." + baseDomain})

	ec, err := clientv3.New(clientv3.Config{Endpoints: c.etcd.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	resp, err := ec.Get(context.Background(), "", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, kv := range resp.Kvs {
		all.Write(kv.Key)
		all.WriteByte(' ')
		all.Write(kv.Value)
		all.WriteByte('\n')
	}
	dump := all.String()
	secretsKey, err := os.ReadFile(filepath.Join(c.keys, "secrets.key"))
	if err != nil {
		t.Fatal(err)
	}
	hostKey, err := os.ReadFile(filepath.Join(c.keys, "ssh_host_ed25519_key"))
	if err != nil {
		t.Fatal(err)
	}
	keyLine := func(file string) string { // the first line that is not a comment
		for _, l := range strings.Split(file, "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				return l
			}
		}
		t.Fatal("no key in the secrets key file")
		return ""
	}
	hostKeyBody := strings.Split(strings.TrimSpace(string(hostKey)), "\n")[1] // a line of the private key's base64
	for what, s := range map[string]string{
		"the secret's value":           value,
		"the secret's value in base64": base64.StdEncoding.EncodeToString([]byte(value)),
		"the secrets key":              keyLine(string(secretsKey)),
		"the SSH host private key":     hostKeyBody,
		"a tunnel key's secret":        tk.Key,
		"an API key's secret":          n.fullKey,
		"the operator key's secret":    n.writeKey,
	} {
		if strings.Contains(dump, s) {
			t.Errorf("etcd holds %s", what)
		}
	}
	if !strings.Contains(dump, strings.TrimSpace(strings.Fields(n.HostKey())[1])) {
		t.Error("etcd lacks the cluster's SSH host public key (its identity)")
	}
	if !strings.Contains(dump, "/tuna-edge/data/secrets/team/db") {
		t.Errorf("the secret's metadata is not where expected:\n%s", dump)
	}
}
