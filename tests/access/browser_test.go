package access_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/tests/browser"
	"code.tuna.am/tuna/k8s-operator/tests/oidcop"
)

// A person in a browser: sent to the provider, logged in, landed on the
// page asked for, where the backend sees who it is and verifies the
// edge's assertion; logged out; refused as a user the policy does not
// admit; sent to log in again when the session expires; shown the
// maintenance page; and, with the provider down, kept in while signed in
// but shown a clear page when a new login is needed. Screenshots of the
// pages go to the test artifacts.
func TestBrowserLogin(t *testing.T) {
	w := start(t)
	w.putPolicy(apiwire.AccessPolicy{Name: "staff", Rules: []apiwire.AccessRule{
		{Name: "webhooks", PathPrefixes: []string{"/webhooks/"}, Public: true},
		{Name: "staff", OIDC: w.oidcRule("example.com")},
	}})
	w.putPolicy(apiwire.AccessPolicy{Name: "brief", SessionLifetimeSeconds: 2, Rules: []apiwire.AccessRule{{OIDC: w.oidcRule()}}})
	w.putPolicy(apiwire.AccessPolicy{Name: "down", Maintenance: true, Rules: []apiwire.AccessRule{{OIDC: w.oidcRule()}}})
	w.publish("app", "staff")
	w.publish("brief", "brief")
	w.publish("maint", "down")
	b := browser.New(t, browser.Options{TrustSPKI: []string{w.op.SPKI}, Resolve: []string{"*." + baseDomain}})

	// Sent to the provider's login page.
	browser.Do(t, b, "open a protected page", chromedp.Navigate(w.origin("app")+"/hello?x=1"), chromedp.WaitVisible("#username"))
	if loc := browser.Get(t, b, "location", chromedp.Location()); !strings.HasPrefix(loc, w.op.Issuer+"/") {
		t.Fatalf("a protected page without a session went to %s, not to the provider %s", loc, w.op.Issuer)
	}
	browser.Screenshot(t, b, "access-login")
	got := loginAs(t, b, alice, w.origin("app")+"/hello?x=1")
	if got.User != alice.Email || got.Email != alice.Email || got.Groups != "staff,ops" {
		t.Errorf("the backend got user %q, email %q, groups %q", got.User, got.Email, got.Groups)
	}
	if got.Verified != alice.ID || got.AssertionErr != "" {
		t.Errorf("the assertion did not verify with the edge's JWKS: subject %q, %s", got.Verified, got.AssertionErr)
	}
	if strings.Contains(got.Cookie, "tuna-") {
		t.Errorf("the backend got the edge's own cookies: %q", got.Cookie)
	}
	if c := browser.Get(t, b, "document.cookie", chromedp.Evaluate[string]("document.cookie")); strings.Contains(c, "tuna-session") {
		t.Errorf("a page's script reads the session cookie (%q): it must be HttpOnly", c)
	}

	// Logged out: the next visit goes to the provider again.
	browser.Do(t, b, "log out", chromedp.Navigate(w.origin("app")+"/.tuna/logout"), chromedp.WaitVisible("#title"))
	if title := heading(t, b); title != "Signed out" {
		t.Fatalf("logout page says %q", title)
	}
	browser.Do(t, b, "open after logout", chromedp.Navigate(w.origin("app")+"/hello"), chromedp.WaitVisible("#username"))

	// A user the policy does not admit sees the deny page, with a way out.
	browser.Do(t, b, "log in as mallory",
		chromedp.SendKeys("#username", mallory.Username), chromedp.SendKeys("#password", mallory.Password),
		chromedp.Click("button[type=submit]"), chromedp.WaitVisible("#title"))
	if title := heading(t, b); title != "Access denied" {
		t.Fatalf("a user of another domain got %q", title)
	}
	if msg := browser.Get(t, b, "message", chromedp.Evaluate[string]("document.getElementById('message').innerText")); !strings.Contains(msg, mallory.Email) {
		t.Errorf("the deny page does not say who is signed in: %q", msg)
	}
	browser.Screenshot(t, b, "access-deny")

	// The maintenance page.
	browser.Do(t, b, "open a site under maintenance", chromedp.Navigate(w.origin("maint")+"/"), chromedp.WaitVisible("#title"))
	if title := heading(t, b); title != "Down for maintenance" {
		t.Fatalf("maintenance page says %q", title)
	}
	browser.Screenshot(t, b, "access-maintenance")

	// A session ends with its lifetime: the next visit logs in again.
	browser.Do(t, b, "open a site with short sessions", chromedp.Navigate(w.origin("brief")+"/"), chromedp.WaitVisible("#username"))
	loginAs(t, b, alice, w.origin("brief")+"/")
	waitFor(t, "the 2 s session to expire", 15*time.Second, func() bool {
		browser.Do(t, b, "reload", chromedp.Navigate(w.origin("brief")+"/"))
		loc := browser.Get(t, b, "location", chromedp.Location())
		return strings.HasPrefix(loc, w.op.Issuer+"/")
	})

	// The provider goes away: a signed-in person stays in, a new login
	// fails closed with a page that says why.
	browser.Do(t, b, "open app again", chromedp.Navigate(w.origin("app")+"/again"), chromedp.WaitVisible("#username"))
	loginAs(t, b, alice, w.origin("app")+"/again")
	w.op.Stop()
	browser.Do(t, b, "open app with the provider down", chromedp.Navigate(w.origin("app")+"/still"), chromedp.WaitVisible("body"))
	if s := pageJSON(t, b); s.Path != "/still" || s.User != alice.Email {
		t.Fatalf("a signed-in person lost the site when the provider went down: %+v", s)
	}
	fresh := browser.Tab(t, b)
	browser.Do(t, fresh, "open app without a session, provider down", chromedp.Navigate(w.origin("app")+"/"), chromedp.WaitVisible("#title"))
	if title := heading(t, fresh); title != "Sign-in is unavailable" {
		t.Fatalf("a new login with the provider down got %q", title)
	}
	browser.Screenshot(t, fresh, "access-provider-down")
	if err := w.op.Resume(); err != nil {
		t.Fatal(err)
	}
	// A failed discovery is remembered for a few seconds, so that
	// anonymous requests cannot make the edge hammer a provider that is
	// down; then logins work again.
	waitFor(t, "logins to work again", 15*time.Second, func() bool {
		browser.Do(t, fresh, "open app with the provider back", chromedp.Navigate(w.origin("app")+"/"))
		return strings.HasPrefix(browser.Get(t, fresh, "location", chromedp.Location()), w.op.Issuer+"/")
	})
}

// loginAs fills the provider's login form and waits to land on want,
// whose body the backend wrote.
func loginAs(t *testing.T, b context.Context, u oidcop.User, want string) seen {
	t.Helper()
	browser.Do(t, b, "log in as "+u.Username,
		chromedp.SendKeys("#username", u.Username), chromedp.SendKeys("#password", u.Password), chromedp.Click("button[type=submit]"))
	waitFor(t, "landing on "+want, 15*time.Second, func() bool {
		return browser.Get(t, b, "location", chromedp.Location()) == want
	})
	return pageJSON(t, b)
}

// heading is the title of one of the edge's pages.
func heading(t *testing.T, b context.Context) string {
	t.Helper()
	return browser.Get(t, b, "heading", chromedp.Evaluate[string]("document.getElementById('title').innerText"))
}

// pageJSON reads what the backend reported on the page shown.
func pageJSON(t *testing.T, b context.Context) seen {
	t.Helper()
	var s seen
	text := browser.Get(t, b, "page text", chromedp.Evaluate[string]("document.body.innerText"))
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		t.Fatalf("the page is not the backend's answer: %v\n%s", err, text)
	}
	return s
}

func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
