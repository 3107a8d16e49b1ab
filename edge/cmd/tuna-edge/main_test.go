package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// The test binary doubles as tuna-edge: with this variable set it runs main.
func TestMain(m *testing.M) {
	if os.Getenv("TUNA_EDGE_TEST_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func command(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "TUNA_EDGE_TEST_RUN_MAIN=1"), env...)
	return cmd
}

func run(t *testing.T, env []string, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := command(env, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("tuna-edge %v: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

func TestKeysAndServe(t *testing.T) {
	dir := t.TempDir()
	// Offline, the keys commands work on an edge's existing state only: a
	// fresh directory is an error, not a new database.
	if msg := runFail(t, nil, "keys", "create", "--offline", "--scope", "full", "--data-dir", dir); !strings.Contains(msg, "holds no edge state") {
		t.Fatalf("offline create in an empty dir: %q", msg)
	}
	if _, err := os.Stat(filepath.Join(dir, "edge.db")); !os.IsNotExist(err) {
		t.Fatalf("a refused command made a database: %v", err)
	}
	keyFile := filepath.Join(dir, "bootstrap-key")

	// serve, configured through the environment only.
	apiAddr := ports.Addr(t) // this process's own port: the child edge listens on it
	srv := command([]string{
		"TUNA_EDGE_DATA_DIR=" + dir,
		"TUNA_EDGE_BASE_DOMAIN=tuna.localhost",
		"TUNA_EDGE_API_LISTEN=" + apiAddr,
		"TUNA_EDGE_SSH_LISTEN=127.0.0.1:0",
		"TUNA_EDGE_HTTP_LISTEN=127.0.0.1:0",
		"TUNA_EDGE_TCP_LISTEN_HOST=127.0.0.1",
		"TUNA_EDGE_DNS_RESOLVER=",
		"TUNA_EDGE_BOOTSTRAP_KEY_FILE=" + keyFile,
	}, "serve")
	var logs bytes.Buffer
	srv.Stderr = &logs
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	defer func() { _ = srv.Process.Kill() }()

	// The certificate is made before the API listens; its fingerprint is
	// what an operator pins, read with the api-fingerprint subcommand.
	deadline := time.Now().Add(15 * time.Second)
	for _, err := os.Stat(server.APICertPath(dir)); err != nil; _, err = os.Stat(server.APICertPath(dir)) {
		if time.Now().After(deadline) {
			t.Fatalf("no API certificate in %s: %v\n%s", dir, err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	fp := strings.TrimSpace(run(t, []string{"TUNA_EDGE_DATA_DIR=" + dir}, "api-fingerprint"))
	if _, err := apiwire.ParseFingerprint(fp); err != nil {
		t.Fatalf("api-fingerprint printed %q: %v", fp, err)
	}
	var asJSON struct {
		Fingerprint string   `json:"fingerprint"`
		DNSNames    []string `json:"dns_names"`
	}
	if err := json.Unmarshal([]byte(run(t, nil, "api-fingerprint", "--data-dir", dir, "-o", "json")), &asJSON); err != nil ||
		asJSON.Fingerprint != fp || !slices.Contains(asJSON.DNSNames, "tuna.localhost") {
		t.Fatalf("api-fingerprint -o json: %+v %v", asJSON, err)
	}
	caPEM := run(t, nil, "api-fingerprint", "--data-dir", dir, "-o", "pem")

	var secret string
	for secret == "" {
		b, _ := os.ReadFile(keyFile)
		secret = strings.TrimSpace(string(b))
		if secret == "" && time.Now().After(deadline) {
			t.Fatalf("no bootstrap key in %s:\n%s", keyFile, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	c := client.New("https://"+apiAddr, secret, client.WithTrust(client.Trust{Fingerprint: fp}))
	var who *apiwire.WhoAmI
	for {
		var err error
		if who, err = c.WhoAmI(context.Background()); err == nil {
			if who.Name != "bootstrap" || who.Scopes[0] != "full" {
				t.Fatalf("whoami = %+v", who)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("edge never answered: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	byCA := client.New("https://"+apiAddr, secret, client.WithTrust(client.Trust{CABundle: []byte(caPEM)}))
	if _, err := byCA.WhoAmI(context.Background()); err != nil {
		t.Fatalf("client trusting api-fingerprint -o pem: %v", err)
	}
	info, err := c.Edge(context.Background())
	if err != nil || info.BaseDomain != "tuna.localhost" || !strings.HasPrefix(info.SSHHostKey, "ssh-ed25519 ") {
		t.Fatalf("edge info %+v %v", info, err)
	}

	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("serve exited with %v\n%s", err, logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
	if !strings.Contains(logs.String(), fp) {
		t.Errorf("the start log does not name the API fingerprint %s:\n%s", fp, logs.String())
	}

	// Stopped: offline on its state.
	if out := run(t, nil, "keys", "list", "--offline", "--data-dir", dir); !strings.Contains(out, who.KeyID) {
		t.Fatalf("keys list --offline:\n%s", out)
	}
	run(t, nil, "keys", "revoke", who.KeyID, "--offline", "--data-dir", dir)
	if out := run(t, nil, "keys", "list", "--offline", "--data-dir", dir); strings.Contains(out, who.KeyID) {
		t.Fatalf("revoked key still listed:\n%s", out)
	}
}

func TestEnvName(t *testing.T) {
	if got := envName("tcp-port-range"); got != "TUNA_EDGE_TCP_PORT_RANGE" {
		t.Fatal(got)
	}
	if _, err := parseRange("10-x"); err == nil {
		t.Fatal("bad range accepted")
	}
}
