// Package access_test runs the edge's access policies for real: the edge
// on loopback, a real OpenID provider (tests/oidcop), tunnels bound by a
// real tunnel client to backends that check what the edge tells them, and
// a real browser (headless Chromium) or net/http clients in front.
package access_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	"code.tuna.am/tuna/k8s-operator/internal/httprule"
	"code.tuna.am/tuna/k8s-operator/tests/oidcop"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
	"code.tuna.am/tuna/k8s-operator/tests/testca"
	"code.tuna.am/tuna/k8s-operator/tests/testedge"
)

const (
	baseDomain = "tuna.localhost"
	owner      = "c1/team-a"
	clientID   = "tuna-edge"
	secret     = "edge-client-secret"
)

// The provider's users: alice is staff at example.com, mallory is not.
var (
	alice   = oidcop.User{ID: "u-alice", Username: "alice", Password: "alice-pass-1", Email: "alice@example.com", EmailVerified: true, FirstName: "Alice", LastName: "Doe", Groups: []string{"staff", "ops"}}
	mallory = oidcop.User{ID: "u-mallory", Username: "mallory", Password: "mallory-pass-1", Email: "mallory@evil.example", EmailVerified: true, FirstName: "Mallory", LastName: "X", Groups: []string{"guests"}}
)

type world struct {
	t        testing.TB
	edge     *server.Edge
	op       *oidcop.Provider
	api      *client.Client
	httpAddr string
	// httpsAddr is the edge's HTTPS listener, with a certificate for
	// *.baseDomain from a test CA whose key's hash is edgeSPKI (what a
	// browser is told to trust).
	httpsAddr, edgeSPKI string
}

// hosts the test publishes; the provider has each one's callback.
var hosts = []string{"app", "brief", "maint", "other", "basic", "share", "split"}

func start(t testing.TB) *world {
	t.Helper()
	httpAddr, httpsAddr := ports.Addr(t), ports.Addr(t)
	_, port, _ := net.SplitHostPort(httpAddr)
	_, tlsPort, _ := net.SplitHostPort(httpsAddr)
	var redirects []string
	for _, h := range hosts {
		redirects = append(redirects, "http://"+h+"."+baseDomain+":"+port+"/.tuna/callback",
			"https://"+h+"."+baseDomain+":"+tlsPort+"/.tuna/callback")
	}
	op := oidcop.Start(t, []oidcop.User{alice, mallory}, []oidcop.Client{{ID: clientID, Secret: secret, RedirectURIs: redirects}})
	caFile := filepath.Join(t.TempDir(), "idp-ca.pem")
	if err := os.WriteFile(caFile, op.CA.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, spki := edgeCertificate(t)
	cfg := testedge.Config(t, t.TempDir())
	cfg.HTTPListen, cfg.HTTPSListen = httpAddr, httpsAddr
	cfg.TLSCertFile, cfg.TLSKeyFile = certFile, keyFile
	cfg.TCPPortRange = ports.Range(t, 4)
	cfg.AccessIdPCAFile = caFile
	// Every login checks the provider first, so a test sees at once that
	// it went away.
	cfg.AccessIdPRecheck = time.Nanosecond
	e := testedge.Start(t, cfg)
	api, _ := testedge.Client(t, e, "operator", apiwire.ScopeWrite)
	return &world{t: t, edge: e, op: op, httpAddr: e.HTTPAddr(), httpsAddr: e.HTTPSAddr(), edgeSPKI: spki, api: api}
}

// edgeCertificate writes the edge's certificate for *.baseDomain, from a
// test CA, and returns its files and its key's base64 SHA-256.
func edgeCertificate(t testing.TB) (certFile, keyFile, spki string) {
	t.Helper()
	ca, err := testca.New("tuna access test CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue("*." + baseDomain)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := testca.PEMFiles(cert)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cert.Leaf.RawSubjectPublicKeyInfo)
	return certFile, keyFile, base64.StdEncoding.EncodeToString(sum[:])
}

// origin is how a browser reaches a host of the edge over plain HTTP.
func (w *world) origin(host string) string {
	_, port, _ := net.SplitHostPort(w.httpAddr)
	return "http://" + host + "." + baseDomain + ":" + port
}

// tlsOrigin is how a browser reaches a host of the edge over HTTPS.
func (w *world) tlsOrigin(host string) string {
	_, port, _ := net.SplitHostPort(w.httpsAddr)
	return "https://" + host + "." + baseDomain + ":" + port
}

func (w *world) oidcRule(allowed ...string) *apiwire.OIDCRule {
	return &apiwire.OIDCRule{IssuerURL: w.op.Issuer, ClientID: clientID, ClientSecret: secret,
		Scopes: []string{"openid", "email", "profile", "groups"}, AllowedDomains: allowed}
}

func (w *world) putPolicy(p apiwire.AccessPolicy) {
	w.t.Helper()
	p.Owner = owner
	if _, err := w.api.PutAccessPolicy(context.Background(), p); err != nil {
		w.t.Fatalf("PUT access policy %s: %v", p.Name, err)
	}
}

// seen is what a backend reports of a request it got.
type seen struct {
	Path      string `json:"path"`
	User      string `json:"user"`
	Email     string `json:"email"`
	Groups    string `json:"groups"`
	Assertion string `json:"assertion"`
	// Verified is the subject of the assertion, when it verified with the
	// edge's published keys; AssertionErr says why not.
	Verified     string `json:"verified"`
	AssertionErr string `json:"assertion_error"`
	Cookie       string `json:"cookie"`
	Auth         string `json:"authorization"`
	Custom       string `json:"custom"`
}

// publish binds host (a label) with the policy named, as owner, and serves
// a backend that reports what it got and verifies the assertion with the
// JWKS the edge publishes.
func (w *world) publish(label, policy string) {
	w.t.Helper()
	w.serve(w.bind(label, policy), w.reporter(label))
}

// bind binds host (a label) with the policy named, as owner, and returns
// the tunnel's listener of the host's requests.
func (w *world) bind(label, policy string) net.Listener {
	w.t.Helper()
	t := w.t
	tk, err := w.api.CreateTunnelKey(context.Background(), apiwire.CreateTunnelKey{Protocol: "http", Address: label, Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	info, err := w.api.Edge(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s, err := tunnelclient.Dial(context.Background(), tunnelclient.Config{Addr: info.SSHAddr, Key: tk.Key, HostKey: info.SSHHostKey,
		KeepaliveInterval: 500 * time.Millisecond, KeepaliveTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Bind(context.Background(), protocol.BindRequest{Protocol: "http", Subdomain: label, AccessPolicy: policy}); err != nil {
		t.Fatalf("bind %s: %v", label, err)
	}
	return s.Listener()
}

// serve serves h on l until the test ends.
func (w *world) serve(l net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(l) }()
	w.t.Cleanup(func() { _ = srv.Close() })
}

// reporter is a backend that reports what it got (seen) and verifies the
// assertion with the keys the edge publishes for host (a label).
func (w *world) reporter(label string) http.Handler {
	host := label + "." + baseDomain
	// The backend fetches the keys the way any backend would: from the
	// host's /.tuna/jwks.json, through the edge.
	toEdge := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", w.httpAddr)
		}}}
	ctx := oidc.ClientContext(context.Background(), toEdge)
	keys := oidc.NewRemoteKeySet(ctx, w.origin(label)+"/.tuna/jwks.json")
	// The assertion's issuer is the origin the client reached: the same
	// keys, another name over HTTPS.
	verifiers := map[string]*oidc.IDTokenVerifier{}
	for scheme, origin := range map[string]string{"http": w.origin(label), "https": w.tlsOrigin(label)} {
		verifiers[scheme] = oidc.NewVerifier(origin+"/.tuna", keys, &oidc.Config{ClientID: host, SupportedSigningAlgs: []string{oidc.ES256}})
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		verifier := verifiers[r.Header.Get(httprule.ForwardedProto)]
		if verifier == nil {
			http.Error(rw, "no "+httprule.ForwardedProto, http.StatusBadRequest)
			return
		}
		out := seen{Path: r.URL.Path, User: r.Header.Get(httprule.IdentityUser), Email: r.Header.Get(httprule.IdentityEmail),
			Groups: r.Header.Get(httprule.IdentityGroups), Assertion: r.Header.Get(httprule.IdentityAssertion),
			Cookie: strings.Join(r.Header.Values("Cookie"), "; "), Auth: r.Header.Get("Authorization"), Custom: r.Header.Get("X-Custom")}
		if out.Assertion != "" {
			tok, err := verifier.Verify(ctx, out.Assertion)
			if err != nil {
				out.AssertionErr = err.Error()
			} else {
				out.Verified = tok.Subject
			}
		}
		rw.Header().Set("Content-Type", "application/json")
		rw.Header().Set("Server", "backend/1.2.3")
		_ = json.NewEncoder(rw).Encode(out)
	})
}
