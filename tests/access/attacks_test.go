package access_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"code.tuna.am/tuna/k8s-operator/edge/access/link"
	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
)

var linksKey = bytes.Repeat([]byte("k"), 32)

// Every attack of docs/security.md#access-at-the-edge, refused with the
// answer the document gives.
func TestAttacksAreRefused(t *testing.T) {
	w := start(t)
	w.putPolicy(apiwire.AccessPolicy{Name: "staff", Rules: []apiwire.AccessRule{
		{Name: "webhooks", PathPrefixes: []string{"/webhooks/"}, Public: true},
		{Name: "staff", OIDC: w.oidcRule("example.com")},
	}})
	hash, err := bcrypt.GenerateFromPassword([]byte("right-password"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	w.putPolicy(apiwire.AccessPolicy{Name: "partners", Rules: []apiwire.AccessRule{
		{BasicAuth: &apiwire.BasicAuthRule{Htpasswd: "partner:" + string(hash) + "\n", Realm: "partners"}}}})
	w.putPolicy(apiwire.AccessPolicy{Name: "shared", Rules: []apiwire.AccessRule{{Links: &apiwire.LinksRule{Key: string(linksKey)}}}})
	w.publish("app", "staff")
	w.publish("other", "staff")
	w.publish("basic", "partners")
	w.publish("share", "shared")
	app, other := w.origin("app"), w.origin("other")

	c := w.browserless(true)
	got, callback := w.login(t, c, app+"/me", alice)
	if got.User != alice.Email || got.Verified != alice.ID {
		t.Fatalf("login: %+v", got)
	}
	session := sessionCookie(t, c, app)
	noFollow := w.browserless(false)

	// What a request without a valid session gets: a GET is sent to the
	// provider, anything else is told to log in.
	toLogin := func(t *testing.T, res *answer, body string) {
		t.Helper()
		if res.StatusCode != http.StatusFound || !strings.HasPrefix(res.Header.Get("Location"), w.op.Issuer+"/") {
			t.Fatalf("got %d %s, want 302 to the provider\n%s", res.StatusCode, res.Header.Get("Location"), body)
		}
	}

	t.Run("forged or tampered cookie", func(t *testing.T) {
		v := []byte(session.Value)
		v[len(v)/2] ^= 1
		for _, bad := range []string{string(v), session.Value[:len(session.Value)-4], "AAAA" + session.Value[4:], "garbage"} {
			res, body := do(t, noFollow, http.MethodGet, app+"/me", nil, "Cookie", "tuna-session="+bad)
			toLogin(t, res, body)
		}
		res, body := do(t, noFollow, http.MethodPost, app+"/me", nil, "Cookie", "tuna-session="+string(v))
		if res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "/.tuna/login") {
			t.Fatalf("a POST with a tampered cookie got %d: %s", res.StatusCode, body)
		}
	})

	t.Run("cookie of host A replayed on host B", func(t *testing.T) {
		res, body := do(t, noFollow, http.MethodGet, app+"/me", nil, "Cookie", "tuna-session="+session.Value)
		if res.StatusCode != http.StatusOK || !strings.Contains(body, alice.Email) {
			t.Fatalf("the cookie does not work on its own host: %d %s", res.StatusCode, body)
		}
		res, body = do(t, noFollow, http.MethodGet, other+"/me", nil, "Cookie", "tuna-session="+session.Value)
		toLogin(t, res, body)
	})

	t.Run("identity field spoofed by the client", func(t *testing.T) {
		spoof := []string{"X-Tuna-User", "admin@example.com", "X-Tuna-Email", "admin@example.com", "X-Tuna-Groups", "admins",
			"X-Tuna-Assertion", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9."}
		res, body := do(t, c, http.MethodGet, app+"/me", nil, spoof...)
		if res.StatusCode != 200 || !strings.Contains(body, `"user":"alice@example.com"`) || !strings.Contains(body, `"groups":"staff,ops"`) ||
			!strings.Contains(body, `"verified":"u-alice"`) {
			t.Fatalf("a signed-in client's own identity fields reached the backend: %s", body)
		}
		res, body = do(t, w.browserless(true), http.MethodGet, app+"/webhooks/x", nil, spoof...)
		if res.StatusCode != 200 || strings.Contains(body, "admin") {
			t.Fatalf("an anonymous client's identity fields reached the backend on a public path: %s", body)
		}
	})

	t.Run("open redirect through the return URL", func(t *testing.T) {
		for _, rd := range []string{"https://evil.example/", "//evil.example/", "/\\evil.example/", "http:evil.example", "/\r\nLocation: https://evil.example/", "https:/evil.example/"} {
			for _, path := range []string{"/.tuna/login?rd=", "/.tuna/logout?rd="} {
				res, body := do(t, noFollow, http.MethodGet, app+path+url.QueryEscape(rd), nil)
				if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "must be a page of this site") {
					t.Errorf("%s%s: %d %s, want 400", path, rd, res.StatusCode, res.Header.Get("Location"))
				}
			}
		}
		res, _ := do(t, noFollow, http.MethodGet, app+"/.tuna/logout?rd=/bye", nil)
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/bye" {
			t.Fatalf("a return path of the host: %d %s", res.StatusCode, res.Header.Get("Location"))
		}
	})

	t.Run("callback replayed without its state", func(t *testing.T) {
		u, _ := url.Parse(callback)
		q := u.Query()
		for _, target := range []string{
			app + "/.tuna/callback?code=" + url.QueryEscape(q.Get("code")),
			app + "/.tuna/callback?code=x&state=" + url.QueryEscape(q.Get("state")),
			callback, // the real one again: its login cookie is spent
		} {
			res, body := do(t, w.browserless(false), http.MethodGet, target, nil)
			if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "Sign-in could not be completed") {
				t.Errorf("%s: %d, want 400", target, res.StatusCode)
			}
			for _, ck := range res.Cookies() {
				if ck.Name == "tuna-session" && ck.Value != "" {
					t.Errorf("%s made a session", target)
				}
			}
		}
	})

	t.Run("callback replayed with its captured login cookie", func(t *testing.T) {
		// The attacker has both halves of a finished login: the callback
		// URL and the login cookie the browser held for it. The code is
		// spent at the provider, so the sign-in is refused and no session
		// is made.
		victim := w.browserless(true)
		jar := &recordingJar{CookieJar: victim.Jar}
		victim.Jar = jar
		_, callback := w.login(t, victim, app+"/me", alice)
		loginCookie := jar.first("tuna-login-")
		if loginCookie == nil {
			t.Fatal("the login set no login cookie")
		}
		res, body := do(t, w.browserless(false), http.MethodGet, callback, nil, "Cookie", loginCookie.Name+"="+loginCookie.Value)
		if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "Sign-in was refused") {
			t.Fatalf("a replayed callback with its login cookie: %d, want 403 Sign-in was refused\n%s", res.StatusCode, body)
		}
		for _, ck := range res.Cookies() {
			if ck.Name == "tuna-session" && ck.Value != "" {
				t.Fatal("a replayed callback made a session")
			}
		}
	})

	t.Run("login asks for PKCE and a nonce", func(t *testing.T) {
		params := func() url.Values {
			res, body := do(t, w.browserless(false), http.MethodGet, app+"/me", nil)
			toLogin(t, res, body)
			u, err := url.Parse(res.Header.Get("Location"))
			if err != nil {
				t.Fatal(err)
			}
			return u.Query()
		}
		a, b := params(), params()
		if a.Get("code_challenge_method") != "S256" || len(a.Get("code_challenge")) != 43 {
			t.Fatalf("the authorization request's PKCE: method %q, challenge %q; want S256 and a SHA-256 in base64url",
				a.Get("code_challenge_method"), a.Get("code_challenge"))
		}
		for _, name := range []string{"state", "nonce", "code_challenge"} {
			if a.Get(name) == "" || a.Get(name) == b.Get(name) {
				t.Errorf("%s: %q and %q in two logins, want a fresh value each", name, a.Get(name), b.Get(name))
			}
		}
	})

	t.Run("expired link", func(t *testing.T) {
		share := w.origin("share")
		host := "share." + baseDomain
		expired, _, _ := link.Sign(linksKey, link.Link{Host: host, Path: "/docs/", Expires: time.Now().Add(-time.Minute)})
		res, body := do(t, noFollow, http.MethodGet, share+link.Path+"?t="+url.QueryEscape(expired), nil)
		if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "This link has expired") {
			t.Fatalf("an expired link: %d %s", res.StatusCode, body)
		}
		other, _, _ := link.Sign(bytes.Repeat([]byte("x"), 32), link.Link{Host: host, Path: "/", Expires: time.Now().Add(time.Hour)})
		res, body = do(t, noFollow, http.MethodGet, share+link.Path+"?t="+url.QueryEscape(other), nil)
		if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "This link is not valid") {
			t.Fatalf("a link signed with another key: %d %s", res.StatusCode, body)
		}
		once, _, _ := link.Sign(linksKey, link.Link{Host: host, Path: "/docs/", Expires: time.Now().Add(time.Hour), Uses: 1})
		visitor := w.browserless(true)
		res, body = do(t, visitor, http.MethodGet, share+link.Path+"?t="+url.QueryEscape(once), nil)
		if res.StatusCode != 200 || !strings.Contains(body, `"path":"/docs/"`) || !strings.Contains(body, `"user":"link:`) {
			t.Fatalf("a good link: %d %s", res.StatusCode, body)
		}
		if res, _ := do(t, visitor, http.MethodGet, share+"/private", nil); res.StatusCode != http.StatusForbidden {
			t.Fatalf("a link's session opened a path outside the link's: %d", res.StatusCode)
		}
		res, body = do(t, w.browserless(true), http.MethodGet, share+link.Path+"?t="+url.QueryEscape(once), nil)
		if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "This link was used up") {
			t.Fatalf("a one-use link used twice: %d %s", res.StatusCode, body)
		}
	})

	t.Run("policy of namespace B on namespace A's host", func(t *testing.T) {
		ctx := context.Background()
		if _, err := w.api.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "shop", Sharing: apiwire.Sharing{Owner: owner, SharedWith: []string{"c1/team-b"}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.api.PutAccessPolicy(ctx, apiwire.AccessPolicy{Name: "open", Owner: "c1/team-b", Rules: []apiwire.AccessRule{{Public: true}}}); err != nil {
			t.Fatal(err)
		}
		tk, err := w.api.CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "http", Address: "shop", Owner: "c1/team-b"})
		if err != nil {
			t.Fatal(err)
		}
		info, _ := w.api.Edge(ctx)
		s, err := tunnelclient.Dial(ctx, tunnelclient.Config{Addr: info.SSHAddr, Key: tk.Key, HostKey: info.SSHHostKey})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, err = s.Bind(ctx, protocol.BindRequest{Protocol: "http", Subdomain: "shop", AccessPolicy: "open"})
		var be *tunnelclient.BindError
		if !errors.As(err, &be) || be.Code != protocol.CodeAddressOwned || !strings.Contains(be.Message, "only its owner may put an access policy on it") {
			t.Fatalf("namespace B's policy on A's shared host: %v", err)
		}
		// Nor through the domain: B cannot change A's reservation.
		_, err = w.api.SetDomainAccessPolicy(ctx, "shop."+baseDomain, "c1/team-b", "open")
		if apiwire.CodeOf(err) != apiwire.CodeAddressOwned {
			t.Fatalf("namespace B set its policy on A's domain: %v", err)
		}
	})

	t.Run("basic auth guessed past the rate limit", func(t *testing.T) {
		basic := w.origin("basic")
		guesser := w.browserless(false)
		try := func(pass string) (*answer, string) {
			req, _ := http.NewRequest(http.MethodGet, basic+"/", nil)
			req.SetBasicAuth("partner", pass)
			res, err := guesser.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			return read(res)
		}
		res, body := try("right-password")
		if res.StatusCode != 200 || !strings.Contains(body, `"user":"partner"`) || strings.Contains(body, `"authorization":"Basic`) {
			t.Fatalf("the right password: %d %s", res.StatusCode, body)
		}
		for i := range 10 {
			if res, _ := try(fmt.Sprintf("guess-%d", i)); res.StatusCode != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") == "" {
				t.Fatalf("wrong password %d: %d", i+1, res.StatusCode)
			}
		}
		res, _ = try("guess-11")
		if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
			t.Fatalf("the 11th guess in a row: %d, Retry-After %q", res.StatusCode, res.Header.Get("Retry-After"))
		}
		// Past the limit even the right password is not checked: a guess
		// that happened to be right would not tell the guesser.
		if res, _ := try("right-password"); res.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("the right password past the limit: %d", res.StatusCode)
		}
	})
}
