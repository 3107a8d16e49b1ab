package main

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/tests/etcdcluster"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// TestMigrateToEtcd moves a single edge's state into etcd with the
// command, then serves it from a cluster node: the old API key works, the
// reservations are there and the secret still opens.
func TestMigrateToEtcd(t *testing.T) {
	dir := t.TempDir()
	single := server.Config{
		DataDir: dir, BaseDomain: "tuna.localhost",
		APIListen: ports.Addr(t), SSHListen: ports.Addr(t), HTTPListen: ports.Addr(t),
		TCPListenHost: "127.0.0.1", TCPPortRange: ports.Range(t, 1),
	}
	e, err := server.New(single)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	key, err := e.CreateAPIKey("ops", []string{apiwire.ScopeFull})
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(e.APIURL(), key, client.WithTrust(client.Trust{Fingerprint: e.APIFingerprint()}))
	ctx := context.Background()
	if _, err := c.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "app"}); err != nil {
		t.Fatal(err)
	}
	ep, err := c.CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: "db"})
	if err != nil {
		t.Fatal(err)
	}
	tk, err := c.CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "http", Address: "app.tuna.localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutSecret(ctx, "team/db", apiwire.PutSecret{Data: map[string][]byte{"password": []byte("s3cret")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutAccessPolicy(ctx, apiwire.AccessPolicy{Name: "open", Owner: "c1/team", Rules: []apiwire.AccessRule{{Public: true}}}); err != nil {
		t.Fatal(err)
	}
	fingerprint := e.APIFingerprint()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	ec, err := etcdcluster.Start(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	endpoints := strings.Join(ec.Endpoints(), ",")
	out := run(t, nil, "migrate-to-etcd", "--data-dir", dir, "--etcd-endpoints", endpoints)
	want := map[string]string{"api_keys": "1 0", "tunnel_keys": "1 0", "domains": "1 0", "tcp_endpoints": "1 0",
		"address_claims": "0 0", "secrets": "1 0", "secret_values": "1 0",
		"access_policies": "1 0", "access_keys": "1 0", "access_link_uses": "0 0",
		"tls_certs": "0 0", "tls_cert_dates": "0 0"}
	if got := report(out); !maps.Equal(got, want) {
		t.Fatalf("migration report %v, want %v:\n%s", got, want, out)
	}
	// Again: nothing left to copy, everything already there.
	out = run(t, nil, "migrate-to-etcd", "--data-dir", dir, "--etcd-endpoints", endpoints)
	for b, n := range want {
		want[b] = "0 " + n[:1]
	}
	if got := report(out); !maps.Equal(got, want) {
		t.Fatalf("second migration's report %v, want %v", got, want)
	}

	// A node on etcd, with the single edge's host key, secrets key and
	// API certificate, serves the migrated state.
	node := single
	node.DataDir = t.TempDir()
	node.APIListen, node.SSHListen, node.HTTPListen = ports.Addr(t), ports.Addr(t), ports.Addr(t)
	node.Etcd = store.EtcdConfig{Endpoints: ec.Endpoints()}
	node.HostKeyFile = filepath.Join(dir, "ssh_host_ed25519_key")
	node.SecretsKeyFile = server.SecretsKeyPath(dir)
	node.APITLSCert, node.APITLSKey = server.APICertPath(dir), server.APICertPath(dir)
	n, err := server.New(node)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.APIFingerprint() != fingerprint {
		t.Fatalf("the node's API fingerprint %s is not the single edge's %s", n.APIFingerprint(), fingerprint)
	}
	c = client.New(n.APIURL(), key, client.WithTrust(client.Trust{Fingerprint: fingerprint}))
	s, err := c.GetSecret(ctx, "team/db")
	if err != nil || string(s.Data["password"]) != "s3cret" {
		t.Fatalf("migrated secret: %+v %v", s, err)
	}
	if got, err := c.GetTCPEndpoint(ctx, "db"); err != nil || got.Port != ep.Port {
		t.Fatalf("migrated endpoint: %+v %v (was port %d)", got, err, ep.Port)
	}
	if _, err := c.GetTunnelKey(ctx, tk.ID); err != nil {
		t.Fatalf("migrated tunnel key: %v", err)
	}
	if _, err := c.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "app"}); apiwire.CodeOf(err) != apiwire.CodeNameTaken {
		t.Fatalf("the migrated reservation is not enforced: %v", err)
	}

	// keys works on the cluster's state while its node runs.
	created := strings.TrimSpace(run(t, nil, "keys", "create", "--scope", "full", "--name", "ops2", "--etcd-endpoints", endpoints))
	c2 := client.New(n.APIURL(), created, client.WithTrust(client.Trust{Fingerprint: fingerprint}))
	who, err := c2.WhoAmI(ctx)
	if err != nil || who.Name != "ops2" {
		t.Fatalf("a key created with keys --etcd-endpoints: %+v %v", who, err)
	}
	run(t, nil, "keys", "revoke", who.KeyID, "--etcd-endpoints", endpoints)
	if _, err := c2.WhoAmI(ctx); apiwire.CodeOf(err) != apiwire.CodeUnauthorized {
		t.Fatalf("a key revoked with keys --etcd-endpoints: %v", err)
	}
	run(t, nil, "keys", "create", "--scope", "full", "--name", "ops3", "--etcd-endpoints", endpoints)

	// The target now holds a record the source does not: refused.
	msg := runFail(t, nil, "migrate-to-etcd", "--data-dir", dir, "--etcd-endpoints", endpoints)
	if !strings.Contains(msg, "already holds 1 record(s)") || !strings.Contains(msg, "api_keys/") || !strings.Contains(msg, "--etcd-prefix") {
		t.Fatalf("migration into a changed target: %q", msg)
	}
}

// report reads the migration table: bucket → "copied present".
func report(out string) map[string]string {
	got := map[string]string{}
	for _, l := range strings.Split(out, "\n")[1:] {
		if f := strings.Fields(l); len(f) == 3 {
			got[f[0]] = f[1] + " " + f[2]
		}
	}
	return got
}

func TestClusterKeys(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	out := run(t, nil, "cluster-keys", "--out", dir)
	for _, name := range []string{"ssh_host_ed25519_key", "secrets.key"} {
		path := filepath.Join(dir, name)
		if !strings.Contains(out, path) {
			t.Fatalf("cluster-keys did not name %s: %q", path, out)
		}
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v, want 0600", path, err, fi.Mode().Perm())
		}
	}
	if msg := runFail(t, nil, "cluster-keys", "--out", dir); !strings.Contains(msg, "never replaced") {
		t.Fatalf("second cluster-keys: %q", msg)
	}
}
