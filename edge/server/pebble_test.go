package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// pebbleBinary builds (or finds cached) pebble, Let's Encrypt's ACME test
// server, from the pinned tools module tests/tools/pebble.
func pebbleBinary(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "tests", "tools", "pebble", "build.sh")
	cmd := exec.Command("bash", script)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("building pebble (%s): %v", script, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

// startPebble runs pebble on loopback until the test ends and returns its
// directory URL, the file of the CA its HTTPS listener uses, and a pool
// trusting the roots it issues from. Challenges are taken as valid
// (PEBBLE_VA_ALWAYS_VALID): this test is about which names the edge orders,
// and pebble cannot reach the edge's ports 80/443 here.
func startPebble(t *testing.T) (dirURL, caFile string, issued *x509.CertPool) {
	t.Helper()
	return startPebbleWith(t, pebbleOptions{})
}

// pebbleOptions make pebble validate challenges for real: it resolves
// names with the DNS server at DNS and connects to HTTPPort (HTTP-01) and
// TLSPort (TLS-ALPN-01) of the address found.
type pebbleOptions struct {
	Validate          bool
	DNS               string
	HTTPPort, TLSPort int
}

func startPebbleWith(t *testing.T, opt pebbleOptions) (dirURL, caFile string, issued *x509.CertPool) {
	t.Helper()
	bin := pebbleBinary(t)
	dir := t.TempDir()
	// A certificate for pebble's own HTTPS listener (127.0.0.1).
	certFile, keyFile, _ := writeServerCert(t, dir, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	listen, mgmt := ports.Addr(t), ports.Addr(t) // pebble listens on them in its own process
	cfg := map[string]any{"pebble": map[string]any{
		"listenAddress":                  listen,
		"managementListenAddress":        mgmt,
		"certificate":                    certFile,
		"privateKey":                     keyFile,
		"httpPort":                       opt.HTTPPort,
		"tlsPort":                        opt.TLSPort,
		"ocspResponderURL":               "",
		"externalAccountBindingRequired": false,
		"retryAfter":                     map[string]int{"authz": 1, "order": 1},
		"profiles": map[string]any{"default": map[string]any{
			"description": "test", "validityPeriod": 86400,
		}},
	}}
	cfgFile := filepath.Join(dir, "pebble.json")
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// No challenge is validated, and -dnsserver keeps any lookup pebble
	// might still make on loopback.
	dns := "127.0.0.1:1"
	env := append(os.Environ(), "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0", "PEBBLE_AUTHZREUSE=0")
	if opt.Validate {
		dns = opt.DNS
	} else {
		env = append(env, "PEBBLE_VA_ALWAYS_VALID=1")
	}
	cmd := exec.Command(bin, "-config", cfgFile, "-dnsserver", dns)
	cmd.Env = env
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting pebble: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("pebble's log:\n%s", logs.String())
		}
	})

	pool := x509.NewCertPool()
	pemBytes, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(pemBytes)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
	var root []byte
	waitFor(t, "pebble to serve its root", func() bool {
		resp, err := hc.Get("https://" + mgmt + "/roots/0")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		root, err = io.ReadAll(resp.Body)
		return err == nil && resp.StatusCode == http.StatusOK
	})
	issued = x509.NewCertPool()
	if !issued.AppendCertsFromPEM(root) {
		t.Fatalf("pebble's root is not PEM: %q", root)
	}
	return "https://" + listen + "/dir", certFile, issued
}

// TestACMEWithPebble runs the edge's ACME against a real ACME server: a
// reserved name gets a certificate that pebble issued, while an unreserved
// one is refused and never ordered.
func TestACMEWithPebble(t *testing.T) {
	dirURL, caFile, issued := startPebble(t)
	var logs syncBuffer
	e := startEdge(t, t.TempDir(), func(c *server.Config) {
		c.HTTPSListen = "127.0.0.1:0"
		c.ACMEDirectory = dirURL
		c.ACMECAFile = caFile
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	if _, err := e.client(e.writeKey).CreateDomain(context.Background(), apiwire.CreateDomain{Subdomain: "shop"}); err != nil {
		t.Fatal(err)
	}

	dial := func(name string) (*tls.Conn, error) {
		d := &tls.Dialer{Config: &tls.Config{ServerName: name, RootCAs: issued, MinVersion: tls.VersionTLS12}}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := d.DialContext(ctx, "tcp", e.HTTPSAddr())
		if err != nil {
			return nil, err
		}
		return c.(*tls.Conn), nil
	}

	name := "shop." + baseDomain
	c, err := dial(name)
	if err != nil {
		t.Fatalf("TLS to %s: %v\nedge log:\n%s", name, err, logs.String())
	}
	leaf := c.ConnectionState().PeerCertificates[0]
	_ = c.Close()
	if !slices.Contains(leaf.DNSNames, name) {
		t.Errorf("certificate for %s names %v", name, leaf.DNSNames)
	}

	other := "random." + baseDomain
	if c, err := dial(other); err == nil {
		_ = c.Close()
		t.Fatalf("TLS to %s succeeded; want a refusal", other)
	}
	want := fmt.Sprintf("no reservation, tunnel key or live tunnel serves %s", other)
	waitFor(t, "the refusal in the edge's log", func() bool { return strings.Contains(logs.String(), want) })
	// The certificate is in the store, its key sealed; nothing for the
	// refused name.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(e.cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if rec, err := st.TLSCert(name); err != nil || !rec.Managed || rec.Key.KeyID == "" {
		t.Errorf("stored certificate for %s: %+v, %v; want a managed one with a sealed key", name, rec, err)
	}
	if _, err := st.TLSCert(other); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("stored certificate for %s: %v; want none", other, err)
	}
	if _, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || leaf.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("the certificate served has a %s key; want ECDSA", leaf.PublicKeyAlgorithm)
	}
}
