// Package oidcop runs a real OpenID provider for tests: zitadel/oidc's OP
// package with its example storage and login page, the users, groups and
// clients a test names, over TLS on loopback with a certificate of a test
// CA. It signs real ID tokens with its own RSA key, does the code flow
// with PKCE, and answers discovery, JWKS and userinfo as any provider.
package oidcop

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"

	"code.tuna.am/tuna/k8s-operator/tests/ports"
	"code.tuna.am/tuna/k8s-operator/tests/testca"
)

// User is an account of the provider.
type User struct {
	ID, Username, Password string
	Email                  string
	EmailVerified          bool
	FirstName, LastName    string
	// Groups go to the ID token's "groups" claim when the client asks
	// for the scope "groups".
	Groups []string
}

// Client is a registered relying party (the edge).
type Client struct {
	ID, Secret   string
	RedirectURIs []string
}

// Provider is a running OpenID provider.
type Provider struct {
	// Issuer is https://127.0.0.1:<port>.
	Issuer string
	// CA signed the provider's certificate: clients trust it.
	CA *testca.CA
	// SPKI is the base64 SHA-256 of the certificate's public key, as
	// Chromium's --ignore-certificate-errors-spki-list takes it.
	SPKI string

	addr    string
	handler http.Handler
	cert    tls.Certificate
	mu      sync.Mutex
	srv     *http.Server
}

// Start runs a provider until the test ends.
func Start(t testing.TB, users []User, clients []Client) *Provider {
	t.Helper()
	ca, err := testca.New("oidcop test CA")
	if err != nil {
		t.Fatal(err)
	}
	addr := ports.Addr(t)
	host, _, _ := net.SplitHostPort(addr)
	cert, err := ca.Issue(host)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cert.Leaf.RawSubjectPublicKeyInfo)
	p := &Provider{Issuer: "https://" + addr, CA: ca, SPKI: base64.StdEncoding.EncodeToString(sum[:]), addr: addr, cert: cert}
	st := userStore{users: map[string]*storage.User{}, groups: map[string][]string{}}
	for _, u := range users {
		st.users[u.ID] = &storage.User{ID: u.ID, Username: u.Username, Password: u.Password, FirstName: u.FirstName,
			LastName: u.LastName, Email: u.Email, EmailVerified: u.EmailVerified, PreferredLanguage: language.English}
		st.groups[u.ID] = u.Groups
	}
	reg := map[string]*storage.Client{}
	for _, c := range clients {
		reg[c.ID] = storage.WebClient(c.ID, c.Secret, c.RedirectURIs...)
	}
	s := &withGroups{Storage: storage.NewStorageWithClients(st, reg), groups: st.groups}
	// The example server logs every request at Info through the default
	// logger, which it replaces with this one: warnings only.
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p.handler = exampleop.SetupServer(p.Issuer, s, quiet, false)
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// Stop closes the provider's listener and connections: it is unreachable
// until Resume.
func (p *Provider) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv != nil {
		_ = p.srv.Close()
		p.srv = nil
	}
}

// Resume serves again on the same address, with the same keys and
// sessions.
func (p *Provider) Resume() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv != nil {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("oidcop: listening on %s: %w", p.addr, err)
	}
	p.srv = &http.Server{Handler: p.handler, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{p.cert}, MinVersion: tls.VersionTLS12},
		ErrorLog:  slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)}
	go func(srv *http.Server) {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("oidcop stopped", "err", err)
		}
	}(p.srv)
	return nil
}

// HTTPClient trusts the provider's certificate.
func (p *Provider) HTTPClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(p.cert.Leaf)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// userStore is the example storage's UserStore over the test's users.
type userStore struct {
	users  map[string]*storage.User
	groups map[string][]string
}

func (s userStore) GetUserByID(id string) *storage.User { return s.users[id] }

func (s userStore) GetUserByUsername(name string) *storage.User {
	for _, u := range s.users {
		if u.Username == name {
			return u
		}
	}
	return nil
}

func (userStore) ExampleClientID() string { return "service" }

// withGroups adds the "groups" claim to the ID token, for the scope
// "groups", as providers such as Dex, Keycloak and Okta do.
type withGroups struct {
	*storage.Storage
	groups map[string][]string
}

// GetClientByClientID lets the clients ask for the scope "groups".
func (s *withGroups) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return groupsClient{c}, nil
}

type groupsClient struct{ op.Client }

func (c groupsClient) IsScopeAllowed(scope string) bool {
	return scope == "groups" || c.Client.IsScopeAllowed(scope)
}

func (s *withGroups) SetUserinfoFromRequest(ctx context.Context, ui *oidc.UserInfo, token op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, ui, token, scopes); err != nil {
		return err
	}
	if slices.Contains(scopes, "groups") {
		ui.AppendClaims("groups", s.groups[token.GetSubject()])
	}
	return nil
}
