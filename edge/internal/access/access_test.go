package access

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/internal/h1"
)

func testKeys(t *testing.T) *keyring {
	t.Helper()
	k, err := NewKeys(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	r, err := newKeyring(k)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSessionCookie(t *testing.T) {
	r := testKeys(t)
	now := time.Unix(1_800_000_000, 0)
	s := &Session{Method: MethodOIDC, Issued: now, Expires: now.Add(time.Hour), ID: "sid", Provider: "oidc:1", Subject: "u1",
		Email: "a@example.com", Name: "A", Groups: []string{"g1", "g2"}, Scope: "/"}
	v, err := r.sealSession("a.example.com", s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.openSession("a.example.com", v, now)
	if err != nil || got.Subject != "u1" || got.Email != s.Email || strings.Join(got.Groups, ",") != "g1,g2" || !got.Expires.Equal(s.Expires) {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if _, err := r.openSession("b.example.com", v, now); err == nil {
		t.Error("a cookie of host a opened on host b")
	}
	if _, err := r.openSession("a.example.com", v, now.Add(time.Hour)); !errors.Is(err, errExpired) {
		t.Errorf("an expired session: %v", err)
	}
	raw, _ := b64.DecodeString(v)
	for i := range raw {
		bad := append([]byte(nil), raw...)
		bad[i] ^= 0x40
		if _, err := r.openSession("a.example.com", b64.EncodeToString(bad), now); err == nil {
			t.Fatalf("a cookie changed at byte %d opened", i)
		}
	}
	// A login cookie is not a session cookie, even for the same host.
	login, _ := r.seal(loginAAD, "a.example.com", s.encode())
	if _, err := r.openSession("a.example.com", login, now); err == nil {
		t.Error("a login cookie opened as a session")
	}
	other := testKeys(t)
	if _, err := other.openSession("a.example.com", v, now); err == nil {
		t.Error("another edge's keys opened the cookie")
	}
}

// TestOpenedSessionsAreKeptBounded: a cookie opened once is not opened
// again (the same session comes back), a forged one is never kept, and
// the cache stays within its bound.
func TestOpenedSessionsAreKeptBounded(t *testing.T) {
	r := testKeys(t)
	now := time.Unix(1_800_000_000, 0)
	s := &Session{Method: MethodOIDC, Issued: now, Expires: now.Add(time.Hour), ID: "sid", Subject: "u1"}
	v, err := r.sealSession("a.example.com", s)
	if err != nil {
		t.Fatal(err)
	}
	first, err := r.openSession("a.example.com", v, now)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := r.openSession("a.example.com", v, now); again != first {
		t.Error("the same cookie was opened again rather than found")
	}
	if _, err := r.openSession("a.example.com", v+"A", now); err == nil {
		t.Fatal("a forged cookie opened")
	}
	if got := r.opened.get(openedKey{"a.example.com", v + "A"}); got != nil {
		t.Error("a cookie that did not open was kept")
	}
	for i := range maxOpened + 10 {
		r.opened.put(openedKey{"h", strconv.Itoa(i)}, s)
	}
	if n := len(r.opened.m); n > maxOpened {
		t.Errorf("%d opened sessions kept, bound %d", n, maxOpened)
	}
}

func TestRotationKeepsThePreviousKey(t *testing.T) {
	k0, _ := NewKeys(time.Now())
	r0, _ := newKeyring(k0)
	k1, _ := k0.Rotate(time.Now())
	r1, _ := newKeyring(k1)
	k2, _ := k1.Rotate(time.Now())
	r2, _ := newKeyring(k2)
	now := time.Now()
	s := &Session{Method: MethodLink, Expires: now.Add(time.Hour)}
	v0, _ := r0.sealSession("h", s)
	v1, _ := r1.sealSession("h", s)
	if _, err := r1.openSession("h", v0, now); err != nil {
		t.Errorf("one rotation later: %v", err)
	}
	if _, err := r2.openSession("h", v1, now); err != nil {
		t.Errorf("one rotation later: %v", err)
	}
	if _, err := r2.openSession("h", v0, now); err == nil {
		t.Error("two rotations later a session still opens")
	}
	if len(k2.Sessions) != KeepKeys || len(k2.Assertions) != KeepKeys {
		t.Errorf("kept %d and %d keys", len(k2.Sessions), len(k2.Assertions))
	}
}

func TestSafeReturnAndNormalPath(t *testing.T) {
	for _, s := range []string{"/", "/a/b?c=d", "/a#f", "/%2F"} {
		if !safeReturn(s) {
			t.Errorf("safeReturn(%q) = false", s)
		}
	}
	for _, s := range []string{"", "a", "//evil", "/\\evil", "https://evil", "http:/evil", "/a\r\nb", "/a\\b", "\\\\evil", "/\tx"} {
		if safeReturn(s) {
			t.Errorf("safeReturn(%q) = true: an open redirect", s)
		}
	}
	for _, p := range []string{"/", "/a/b", "/a.b/c", "/%41", "/a/.well-known/x"} {
		if !normalPath(p) {
			t.Errorf("normalPath(%q) = false", p)
		}
	}
	for _, p := range []string{"/a/../b", "/a/./b", "/a/..", "/a/.", "//a", "/a%2fb", "/a%2Fb", "/a%5Cb", "/%2e%2e/a", "/a\\b"} {
		if normalPath(p) {
			t.Errorf("normalPath(%q) = true", p)
		}
	}
}

func TestCompileRefuses(t *testing.T) {
	good := apiwire.AccessRule{Public: true}
	for _, tc := range []struct {
		p    apiwire.AccessPolicy
		want string
	}{
		{apiwire.AccessPolicy{Owner: "o", Name: "n"}, "at least one rule"},
		{apiwire.AccessPolicy{Owner: "o", Name: "n", Rules: []apiwire.AccessRule{{}}}, "exactly one of"},
		{apiwire.AccessPolicy{Owner: "o", Name: "n", Rules: []apiwire.AccessRule{{Public: true, Deny: true}}}, "exactly one of"},
		{apiwire.AccessPolicy{Owner: "o", Name: "n", Rules: []apiwire.AccessRule{{BasicAuth: &apiwire.BasicAuthRule{Htpasswd: "u:$apr1$x$y"}}}}, "only bcrypt"},
		{apiwire.AccessPolicy{Owner: "o", Name: "n", Rules: []apiwire.AccessRule{{BasicAuth: &apiwire.BasicAuthRule{Htpasswd: "u:{SHA}abc"}}}}, "only bcrypt"},
		{apiwire.AccessPolicy{Owner: "o", Name: "n", Rules: []apiwire.AccessRule{{Links: &apiwire.LinksRule{Key: "short"}}}}, "at least 32 bytes"},
		{apiwire.AccessPolicy{Owner: "o", Name: "n", Rules: []apiwire.AccessRule{{OIDC: &apiwire.OIDCRule{IssuerURL: "http://idp.example.com", ClientID: "c"}}}}, "must be https"},
		{apiwire.AccessPolicy{Owner: "o", Name: "n", Rules: []apiwire.AccessRule{{IP: &apiwire.IPRule{AllowCIDRs: []string{"10.0.0.0/33"}}}}}, "not a CIDR"},
		{apiwire.AccessPolicy{Owner: "o", Name: "n", Rules: []apiwire.AccessRule{{PathPrefixes: []string{"api"}, Public: true}}}, "must start with '/'"},
		{apiwire.AccessPolicy{Owner: "o", Name: "n", Rules: []apiwire.AccessRule{good},
			RequestHeaders: &apiwire.HeaderEdits{Set: map[string]string{"X-Tuna-User": "admin"}}}, "written by the edge"},
		{apiwire.AccessPolicy{Owner: "o", Name: "n", Rules: []apiwire.AccessRule{good},
			ResponseHeaders: &apiwire.HeaderEdits{Set: map[string]string{"Content-Length": "1"}}}, "framing"},
		{apiwire.AccessPolicy{Owner: "o", Name: "n", Rules: []apiwire.AccessRule{good},
			RequestHeaders: &apiwire.HeaderEdits{Set: map[string]string{"X-A": "a\r\nb"}}}, "line break"},
		{apiwire.AccessPolicy{Owner: "o", Name: "n", Rules: []apiwire.AccessRule{good},
			RateLimits: &apiwire.AccessRateLimits{PerClientIP: &apiwire.RequestRate{Requests: 0, PeriodSeconds: 1}}}, "requests must be"},
		{apiwire.AccessPolicy{Owner: "o", Name: "n", Rules: []apiwire.AccessRule{good}, SessionLifetimeSeconds: 31 * 86400}, "session_lifetime_seconds"},
	} {
		_, err := Compile(tc.p, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compile(%+v) = %v, want an error with %q", tc.p, err, tc.want)
		}
	}
}

// A Secret's value put where an htpasswd file belongs (a token, a
// password) is refused without a byte of it in the error, which becomes
// the AccessPolicy's status message.
func TestCompileEchoesNoSecretText(t *testing.T) {
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	for _, htpasswd := range []string{
		"s3cr3t-t0ken:notahash",
		"s3cr3t-t0ken",
		"s3cr3t-t0ken:" + string(hash) + "\ns3cr3t-t0ken:" + string(hash),
	} {
		_, err := Compile(apiwire.AccessPolicy{Owner: "o", Name: "n", Rules: []apiwire.AccessRule{{BasicAuth: &apiwire.BasicAuthRule{Htpasswd: htpasswd}}}}, nil)
		if err == nil || strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), "line") {
			t.Errorf("htpasswd %q: error %v, want one naming the line and none of the Secret's text", htpasswd, err)
		}
	}
}

// decideFor runs a policy's decision on a request from remote.
func decideFor(t *testing.T, e *Engine, p *Policy, method, path, remote, authorization string) decision {
	t.Helper()
	return p.decide(e, &request{method: method, path: path, target: path, host: "h", authority: "h", remote: remote,
		authorization: authorization}, e.keys.Load(), time.Now(), false)
}

// Rules decide in order: ip rules refuse or pass on, public and deny end,
// identity rules admit or leave the first challenge as the answer.
func TestRulesDecideInOrder(t *testing.T) {
	e := New(Config{})
	k, _ := NewKeys(time.Now())
	if err := e.SetKeys(k); err != nil {
		t.Fatal(err)
	}
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	p, err := Compile(apiwire.AccessPolicy{Owner: "o", Name: "n", Rules: []apiwire.AccessRule{
		{IP: &apiwire.IPRule{DenyCIDRs: []string{"198.51.100.0/24"}}},
		{PathPrefixes: []string{"/hooks/"}, Methods: []string{"POST"}, Public: true},
		{PathPrefixes: []string{"/admin/"}, Deny: true},
		{PathPrefixes: []string{"/app/"}, BasicAuth: &apiwire.BasicAuthRule{Htpasswd: "u:" + string(hash)}},
		{PathPrefixes: []string{"/app/"}, Links: &apiwire.LinksRule{Key: strings.Repeat("k", 32)}},
	}}, e)
	if err != nil {
		t.Fatal(err)
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("u:pw"))
	for _, tc := range []struct {
		method, path, remote, auth string
		want                       verdict
	}{
		{"POST", "/hooks/x", "198.51.100.7", "", deny},
		{"POST", "/hooks/x", "203.0.113.1", "", pass},
		{"GET", "/hooks/x", "203.0.113.1", "", pass}, // no rule applies: not protected
		{"GET", "/admin/x", "203.0.113.1", basic, deny},
		{"GET", "/app/x", "203.0.113.1", "", challenge},
		{"GET", "/app/x", "203.0.113.1", basic, pass},
		{"GET", "/app/x", "203.0.113.1", "Basic " + base64.StdEncoding.EncodeToString([]byte("u:no")), wrongPassword},
	} {
		d := decideFor(t, e, p, tc.method, tc.path, tc.remote, tc.auth)
		if d.verdict != tc.want {
			t.Errorf("%s %s from %s: verdict %d, want %d", tc.method, tc.path, tc.remote, d.verdict, tc.want)
		}
	}
}

func TestLimiter(t *testing.T) {
	l := newBucket(3, 3*time.Second)
	now := time.Unix(100, 0)
	for i := range 3 {
		if ok, _ := l.take("a", now); !ok {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	ok, wait := l.take("a", now)
	if ok || wait != time.Second {
		t.Fatalf("past the burst: %v, wait %v", ok, wait)
	}
	if ok, _ := l.take("b", now); !ok {
		t.Fatal("another key shares the bucket")
	}
	if ok, _ := l.take("a", now.Add(time.Second)); !ok {
		t.Fatal("a request refused once a token is back")
	}
	if retryAfter(1500*time.Millisecond) != "2" || retryAfter(0) != "1" {
		t.Fatal("Retry-After rounds up, at least 1")
	}
}

// The relay lets through what it can decide at once: a public path, the
// right password; a request that needs a login or an answer of the edge
// goes to net/http, which counts a wrong password once.
func TestRelayLeavesWorkToNetHTTP(t *testing.T) {
	now := time.Now()
	e := New(Config{Now: func() time.Time { return now }})
	k, _ := NewKeys(time.Now())
	if err := e.SetKeys(k); err != nil {
		t.Fatal(err)
	}
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	p, err := Compile(apiwire.AccessPolicy{Owner: "o", Name: "n", Rules: []apiwire.AccessRule{
		{PathPrefixes: []string{"/pub/"}, Public: true},
		{BasicAuth: &apiwire.BasicAuthRule{Htpasswd: "u:" + string(hash)}},
	}}, e)
	if err != nil {
		t.Fatal(err)
	}
	e.Put(p)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("u:pw"))
	head := func(target string, fields ...string) *h1.Head {
		h := &h1.Head{Method: []byte("GET"), Target: []byte(target), Host: []byte("h")}
		for i := 0; i+1 < len(fields); i += 2 {
			h.Fields = append(h.Fields, h1.Field{Name: []byte(fields[i]), Value: []byte(fields[i+1])})
		}
		return h
	}
	if _, ok := e.Relay("o/n", "h", head("/pub/a"), "127.0.0.1:1", false); !ok {
		t.Error("a public path left the relay")
	}
	for _, target := range []string{"/private", "/.tuna/login", "/pub/../private"} {
		if _, ok := e.Relay("o/n", "h", head(target), "127.0.0.1:1", false); ok {
			t.Errorf("the relay took %s", target)
		}
	}
	// The relay checks new credentials itself, so that a client with the
	// right password keeps its connection on the relay ...
	ed, ok := e.Relay("o/n", "h", head("/private", "Authorization", basic), "127.0.0.1:1", false)
	if !ok || !containsFold(ed.Drop, "authorization") || string(ed.Set[0].Name) != "X-Tuna-User" || string(ed.Set[0].Value) != "u" {
		t.Fatalf("the relay with the right password: %v %+v", ok, ed)
	}
	// ... and net/http takes the same verdict from the cache.
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "http://h/private", nil)
	r.Header.Set("Authorization", basic)
	if _, pass := e.Serve(w, r, "o/n", "127.0.0.1:1", false, nil); !pass || r.Header.Get("Authorization") != "" || r.Header.Get("X-Tuna-User") != "u" {
		t.Fatalf("net/http's check: pass %v, headers %v", pass, r.Header)
	}
	// A wrong password leaves the relay uncounted; net/http answers it
	// and counts it once: failureBurst of them are answered 401, the
	// next 429.
	wrong := "Basic " + base64.StdEncoding.EncodeToString([]byte("u:guess"))
	for i := range failureBurst + 1 {
		if _, ok := e.Relay("o/n", "h", head("/private", "Authorization", wrong), "192.0.2.7:1", false); ok {
			t.Fatal("the relay passed a wrong password")
		}
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "http://h/private", nil)
		r.Header.Set("Authorization", wrong)
		_, pass := e.Serve(w, r, "o/n", "192.0.2.7:1", false, nil)
		want := http.StatusUnauthorized
		if i == failureBurst {
			want = http.StatusTooManyRequests
		}
		if pass || w.Code != want {
			t.Fatalf("wrong password %d: pass %v, %d; want %d", i+1, pass, w.Code, want)
		}
	}
	if _, ok := e.Relay("o/missing", "h", head("/pub/a"), "127.0.0.1:1", false); ok {
		t.Error("the relay took a request for a policy that is not in force")
	}
	w = httptest.NewRecorder()
	if _, pass := e.Serve(w, httptest.NewRequest("GET", "http://h/", nil), "o/missing", "127.0.0.1:1", false, nil); pass || w.Code != http.StatusServiceUnavailable {
		t.Errorf("net/http with a missing policy: pass %v, %d", pass, w.Code)
	}
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// Over TLS the relay reads the __Host- session cookie and issues the
// assertion for the https origin; a plain-HTTP cookie sent over TLS, or a
// TLS one over plain HTTP, is not a session there (net/http answers).
func TestRelayOverTLS(t *testing.T) {
	e := New(Config{})
	k, _ := NewKeys(time.Now())
	if err := e.SetKeys(k); err != nil {
		t.Fatal(err)
	}
	p, err := Compile(apiwire.AccessPolicy{Owner: "o", Name: "n", Rules: []apiwire.AccessRule{{OIDC: &apiwire.OIDCRule{
		IssuerURL: "https://idp.example.com", ClientID: "c", ClientSecret: "s"}}}}, e)
	if err != nil {
		t.Fatal(err)
	}
	e.Put(p)
	now := time.Now()
	v, err := e.keys.Load().sealSession("h.example.com", &Session{Method: MethodOIDC, Provider: p.rules[0].oidc.id, Issued: now,
		Expires: now.Add(time.Hour), ID: "sid", Subject: "u1", Email: "a@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	head := func(cookie string) *h1.Head {
		return &h1.Head{Method: []byte("GET"), Target: []byte("/"), Host: []byte("h.example.com"),
			Fields: []h1.Field{{Name: []byte("Cookie"), Value: []byte(cookie + "=" + v)}}}
	}
	ed, ok := e.Relay("o/n", "h.example.com", head("__Host-tuna-session"), "127.0.0.1:1", true)
	if !ok {
		t.Fatal("the relay did not take a valid session over TLS")
	}
	var assertion string
	for _, f := range ed.Set {
		if string(f.Name) == "X-Tuna-Assertion" {
			assertion = string(f.Value)
		}
	}
	parts := strings.Split(assertion, ".")
	if len(parts) != 3 {
		t.Fatalf("no assertion in %+v", ed.Set)
	}
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if !strings.Contains(string(payload), `"iss":"https://h.example.com/.tuna"`) {
		t.Errorf("the assertion over TLS: %s", payload)
	}
	if _, ok := e.Relay("o/n", "h.example.com", head("tuna-session"), "127.0.0.1:1", true); ok {
		t.Error("the relay took the plain-HTTP cookie over TLS")
	}
	if _, ok := e.Relay("o/n", "h.example.com", head("__Host-tuna-session"), "127.0.0.1:1", false); ok {
		t.Error("the relay took the TLS cookie over plain HTTP")
	}
}

// A burst of clients with the right password, none checked yet, all get
// in: they wait for the bcrypt slots rather than being refused. With
// every slot taken for longer than the wait, the answer is 429.
func TestBasicAuthBurstWaitsForSlots(t *testing.T) {
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	b, err := compileBasic(&apiwire.BasicAuthRule{Htpasswd: "u:" + string(hash)})
	if err != nil {
		t.Fatal(err)
	}
	g := newGuard()
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("u:pw"))
	now := time.Now()
	const clients = 4 * bcryptSlots
	outcomes := make(chan basicOutcome, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			out, _, _ := b.check(g, auth, fmt.Sprintf("192.0.2.%d", i), now, false)
			outcomes <- out
		})
	}
	wg.Wait()
	close(outcomes)
	for out := range outcomes {
		if out != basicOK {
			t.Fatalf("a client with the right password got outcome %v in a burst of %d", out, clients)
		}
	}

	g.wait = 10 * time.Millisecond
	for range bcryptSlots {
		g.slots <- struct{}{}
	}
	other := "Basic " + base64.StdEncoding.EncodeToString([]byte("u:other"))
	if out, _, wait := b.check(g, other, "192.0.2.200", now, false); out != basicLimited || wait <= 0 {
		t.Fatalf("every slot taken: outcome %v, wait %v; want limited with a wait", out, wait)
	}
}
