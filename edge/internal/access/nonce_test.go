package access

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// fakeProvider is a FAKE OpenID provider, named as such: the nonce check
// guards against an ID token minted for another login, which a real
// provider that enforces PKCE (tests/oidcop) never lets a code be
// redeemed for, so the failure cannot be produced with it. It serves
// discovery, its key and a token endpoint that answers any code with an
// ID token carrying the nonce the test sets.
type fakeProvider struct {
	srv   *httptest.Server
	key   *rsa.PrivateKey
	mu    sync.Mutex
	nonce string
}

func newFakeProvider(t *testing.T) *fakeProvider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeProvider{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		iss := f.srv.URL
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": iss, "authorization_endpoint": iss + "/authorize",
			"token_endpoint": iss + "/token", "jwks_uri": iss + "/keys", "id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, _ *http.Request) {
		b64 := base64.RawURLEncoding
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []any{map[string]any{"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
			"n": b64.EncodeToString(key.N.Bytes()), "e": b64.EncodeToString(big.NewInt(int64(key.E)).Bytes())}}})
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, _ *http.Request) {
		f.mu.Lock()
		nonce := f.nonce
		f.mu.Unlock()
		now := time.Now()
		idt := f.sign(t, map[string]any{"iss": f.srv.URL, "aud": "c", "sub": "u-alice", "email": "alice@example.com",
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "nonce": nonce})
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "a", "token_type": "Bearer", "expires_in": 3600, "id_token": idt})
	})
	f.srv = httptest.NewTLSServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// sign makes an RS256 JWT of claims.
func (f *fakeProvider) sign(t *testing.T, claims map[string]any) string {
	b64 := base64.RawURLEncoding
	head, _ := json.Marshal(map[string]string{"alg": "RS256", "kid": "k1", "typ": "JWT"})
	body, _ := json.Marshal(claims)
	signing := b64.EncodeToString(head) + "." + b64.EncodeToString(body)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, f.key, crypto.SHA256, sum[:])
	if err != nil {
		t.Error(err)
	}
	return signing + "." + b64.EncodeToString(sig)
}

// An ID token whose nonce is not the one of the login it completes is
// refused (403, no session); the same flow with the login's own nonce
// makes a session, so the refusal is the nonce's.
func TestCallbackRefusesAnotherLoginsNonce(t *testing.T) {
	f := newFakeProvider(t)
	e := New(Config{IdPClient: f.srv.Client()})
	k, err := NewKeys(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetKeys(k); err != nil {
		t.Fatal(err)
	}
	p, err := Compile(apiwire.AccessPolicy{Owner: "o", Name: "n", Rules: []apiwire.AccessRule{
		{OIDC: &apiwire.OIDCRule{IssuerURL: f.srv.URL, ClientID: "c", ClientSecret: "s"}}}}, e)
	if err != nil {
		t.Fatal(err)
	}
	e.Put(p)
	login := func(nonce func(asked string) string) *httptest.ResponseRecorder {
		t.Helper()
		w := httptest.NewRecorder()
		if _, pass := e.Serve(w, httptest.NewRequest("GET", "http://h/page", nil), "o/n", "192.0.2.1:1", false, nil); pass || w.Code != http.StatusFound {
			t.Fatalf("a request without a session: %d, want 302 to the provider", w.Code)
		}
		to, err := url.Parse(w.Header().Get("Location"))
		if err != nil || !strings.HasPrefix(to.String(), f.srv.URL+"/authorize") {
			t.Fatalf("sent to %q, want the provider's authorization endpoint", w.Header().Get("Location"))
		}
		f.mu.Lock()
		f.nonce = nonce(to.Query().Get("nonce"))
		f.mu.Unlock()
		cb := httptest.NewRequest("GET", "http://h/.tuna/callback?code=x&state="+url.QueryEscape(to.Query().Get("state")), nil)
		for _, ck := range w.Result().Cookies() {
			cb.AddCookie(ck)
		}
		w = httptest.NewRecorder()
		e.Serve(w, cb, "o/n", "192.0.2.1:1", false, nil)
		return w
	}
	sessionMade := func(w *httptest.ResponseRecorder) bool {
		for _, ck := range w.Result().Cookies() {
			if ck.Name == sessionCookie && ck.Value != "" {
				return true
			}
		}
		return false
	}
	if w := login(func(asked string) string { return asked }); w.Code != http.StatusSeeOther || !sessionMade(w) {
		t.Fatalf("the login's own nonce: %d (session %v), want 303 and a session\n%s", w.Code, sessionMade(w), w.Body)
	}
	w := login(func(string) string { return "another-logins-nonce" })
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "Sign-in was refused") || sessionMade(w) {
		t.Fatalf("another login's nonce: %d (session %v), want 403 Sign-in was refused and no session\n%s", w.Code, sessionMade(w), w.Body)
	}
}
