package server_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/edge/server"
)

// lockedBuffer collects log lines written from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func withLog(buf *lockedBuffer) func(*server.Config) {
	return func(c *server.Config) { c.Logger = slog.New(slog.NewTextHandler(buf, nil)) }
}

// The API serves TLS by default; a plain-HTTP request to its port is
// refused, and the generated certificate's fingerprint is in the start log.
func TestAPIServesTLSByDefault(t *testing.T) {
	var logs lockedBuffer
	e := startEdge(t, t.TempDir(), withLog(&logs))
	if !strings.HasPrefix(e.APIURL(), "https://") {
		t.Fatalf("APIURL = %s, want https", e.APIURL())
	}
	fp := e.APIFingerprint()
	if _, err := apiwire.ParseFingerprint(fp); err != nil {
		t.Fatalf("APIFingerprint %q: %v", fp, err)
	}
	if !strings.Contains(logs.String(), "fingerprint="+fp) {
		t.Errorf("the start log does not name the fingerprint %s:\n%s", fp, logs.String())
	}

	plainURL := "http://" + strings.TrimPrefix(e.APIURL(), "https://")
	_, err := client.New(plainURL, e.writeKey).WhoAmI(context.Background())
	var ae *apiwire.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, "HTTPS") {
		t.Fatalf("plain HTTP to the TLS port: %v, want the server's 400 about HTTPS", err)
	}
	if _, err := e.client(e.writeKey).WhoAmI(context.Background()); err != nil {
		t.Fatalf("pinned TLS client: %v", err)
	}
}

// Plain HTTP only with InsecureHTTPAPI, and then every start warns.
func TestAPIInsecureHTTPIsExplicit(t *testing.T) {
	var logs lockedBuffer
	dir := t.TempDir()
	e := startEdge(t, dir, withLog(&logs), func(c *server.Config) { c.InsecureHTTPAPI = true })
	if !strings.HasPrefix(e.APIURL(), "http://") || e.APIFingerprint() != "" {
		t.Fatalf("APIURL = %s, fingerprint %q: want plain HTTP", e.APIURL(), e.APIFingerprint())
	}
	if who, err := client.New(e.APIURL(), e.writeKey).WhoAmI(context.Background()); err != nil || who.KeyID == "" {
		t.Fatalf("plain HTTP with the insecure flag: %+v %v", who, err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "INSECURE") {
		t.Fatalf("no WARN about plain HTTP in the start log:\n%s", logs.String())
	}
	if _, err := os.Stat(server.APICertPath(dir)); !os.IsNotExist(err) {
		t.Errorf("a certificate was generated for a plain-HTTP API: %v", err)
	}
	// A client that pins cannot be pointed at plain HTTP by mistake.
	_, err := client.New(e.APIURL(), e.writeKey, client.WithTrust(client.Trust{Fingerprint: apiwire.Fingerprint([]byte("x"))})).WhoAmI(context.Background())
	if err == nil || !strings.Contains(err.Error(), "https://") {
		t.Fatalf("pinning client on an http:// URL: %v, want a refusal naming https://", err)
	}
	if _, err := server.New(server.Config{DataDir: dir, BaseDomain: baseDomain, APIListen: "127.0.0.1:0", SSHListen: "127.0.0.1:0",
		HTTPListen: "127.0.0.1:0", InsecureHTTPAPI: true, APITLSCert: "c.pem", APITLSKey: "k.pem"}); err == nil {
		t.Fatal("InsecureHTTPAPI with a certificate was accepted")
	}
}

// A client pinning another fingerprint fails before sending its key, and
// the error names both fingerprints; the right pin and the certificate as a
// CA bundle both work.
func TestAPIPinning(t *testing.T) {
	e := startEdge(t, t.TempDir())
	ctx := context.Background()
	wrong := apiwire.Fingerprint([]byte("another certificate"))
	_, err := client.New(e.APIURL(), e.writeKey, client.WithTrust(client.Trust{Fingerprint: wrong})).WhoAmI(ctx)
	if err == nil || !strings.Contains(err.Error(), e.APIFingerprint()) || !strings.Contains(err.Error(), wrong) {
		t.Fatalf("wrong pin: %v, want an error naming %s and %s", err, e.APIFingerprint(), wrong)
	}

	// The pin as openssl prints it (upper case, colons) is the same pin.
	hexPart := strings.TrimPrefix(e.APIFingerprint(), apiwire.FingerprintPrefix)
	var openssl []string
	for i := 0; i < len(hexPart); i += 2 {
		openssl = append(openssl, strings.ToUpper(hexPart[i:i+2]))
	}
	for name, tr := range map[string]client.Trust{
		"pin":            {Fingerprint: e.APIFingerprint()},
		"openssl pin":    {Fingerprint: "SHA256:" + strings.Join(openssl, ":")},
		"CA bundle":      {CABundle: e.APICertificatePEM()},
		"pin and bundle": {Fingerprint: e.APIFingerprint(), CABundle: e.APICertificatePEM()},
	} {
		if who, err := client.New(e.APIURL(), e.writeKey, client.WithTrust(tr)).WhoAmI(ctx); err != nil || who.KeyID == "" {
			t.Errorf("%s: %+v %v", name, who, err)
		}
	}

	// Without a pin or bundle the system roots do not know the certificate.
	if _, err := client.New(e.APIURL(), e.writeKey).WhoAmI(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("unpinned client accepted a self-signed certificate: %v", err)
	}
	// A bundle that is not the edge's is refused too.
	other := startEdge(t, t.TempDir())
	if _, err := client.New(e.APIURL(), e.writeKey, client.WithTrust(client.Trust{CABundle: other.APICertificatePEM()})).WhoAmI(ctx); err == nil {
		t.Fatal("a foreign CA bundle was accepted")
	}
	if _, err := (client.Trust{CABundle: []byte("not PEM")}).TLSConfig(); err == nil {
		t.Fatal("a CA bundle without certificates was accepted")
	}
	if _, err := apiwire.ParseFingerprint("sha256:abcd"); err == nil {
		t.Fatal("a short fingerprint was accepted")
	}
}

// The generated certificate is kept in the data dir (0600) and reused: a
// restarted edge has the same fingerprint, and a pinned client still works.
func TestAPICertificateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	e1 := startEdge(t, dir)
	fp := e1.APIFingerprint()
	pinned := e1.client(e1.writeKey)
	if _, err := pinned.WhoAmI(context.Background()); err != nil {
		t.Fatal(err)
	}
	apiAddr := strings.TrimPrefix(e1.APIURL(), "https://")
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(server.APICertPath(dir))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("certificate file: %v, mode %v; want 0600", err, fi)
	}
	// Someone loosened the mode: the next start restricts it again.
	if err := os.Chmod(server.APICertPath(dir), 0o644); err != nil {
		t.Fatal(err)
	}

	var logs lockedBuffer
	e2 := startEdge(t, dir, withLog(&logs), func(c *server.Config) { c.APIListen = apiAddr })
	if e2.APIFingerprint() != fp {
		t.Fatalf("fingerprint changed across restart: %s then %s", fp, e2.APIFingerprint())
	}
	if _, err := pinned.WhoAmI(context.Background()); err != nil {
		t.Fatalf("the client pinned before the restart: %v", err)
	}
	if fi, err := os.Stat(server.APICertPath(dir)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode after restart: %v %v", fi, err)
	}
	if !strings.Contains(logs.String(), "source=reused") {
		t.Errorf("start log does not say the certificate was reused:\n%s", logs.String())
	}
	cert, err := server.ReadAPICertificate(dir, "")
	if err != nil || apiwire.Fingerprint(cert.Raw) != fp {
		t.Fatalf("ReadAPICertificate: %v %v, want fingerprint %s", cert, err, fp)
	}
	if _, err := server.ReadAPICertificate(t.TempDir(), ""); err == nil || !strings.Contains(err.Error(), "start the edge once") {
		t.Fatalf("empty data dir: %v", err)
	}
}

// A configured certificate replaces the generated one.
func TestAPIConfiguredCertificate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := writeWildcardCert(t, t.TempDir())
	e := startEdge(t, dir, func(c *server.Config) { c.APITLSCert, c.APITLSKey = certFile, keyFile })
	cert, err := server.ReadAPICertificate(dir, certFile)
	if err != nil {
		t.Fatal(err)
	}
	if e.APIFingerprint() != apiwire.Fingerprint(cert.Raw) {
		t.Fatalf("APIFingerprint %s is not the configured certificate's %s", e.APIFingerprint(), apiwire.Fingerprint(cert.Raw))
	}
	if _, err := e.client(e.writeKey).WhoAmI(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(server.APICertPath(dir)); !os.IsNotExist(err) {
		t.Errorf("a certificate was generated although one is configured: %v", err)
	}
}
