package access_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/tests/browser"
)

// A person in a browser logs in through the edge's HTTPS listener, over
// HTTP/2: the session cookie the browser keeps is __Host-tuna-session,
// Secure, HttpOnly, SameSite=Lax, Path=/, for the exact host that made it
// (no Domain attribute); the login's own cookie is gone; the backend
// verifies an assertion issued for the https origin; and the next host of
// the same edge asks for a login of its own.
func TestBrowserLoginOverHTTPS(t *testing.T) {
	w := start(t)
	w.putPolicy(apiwire.AccessPolicy{Name: "staff", Rules: []apiwire.AccessRule{{OIDC: w.oidcRule("example.com")}}})
	w.publish("app", "staff")
	w.publish("other", "staff")
	b := browser.New(t, browser.Options{TrustSPKI: []string{w.op.SPKI, w.edgeSPKI}, Resolve: []string{"*." + baseDomain}})

	page := w.tlsOrigin("app") + "/hello"
	browser.Do(t, b, "open a protected page over HTTPS", chromedp.Navigate(page), chromedp.WaitVisible("#username"))
	got := loginAs(t, b, alice, page)
	if got.User != alice.Email || got.Verified != alice.ID || got.AssertionErr != "" {
		t.Fatalf("the backend over HTTPS got user %q, verified %q (%s)", got.User, got.Verified, got.AssertionErr)
	}
	// Chromium speaks HTTP/2 to the HTTPS listener: the login went through
	// the edge's HTTP/2 server, as every browser's visit does.
	if p := browser.Get(t, b, "the page's protocol", chromedp.Evaluate[string](`performance.getEntriesByType("navigation")[0].nextHopProtocol`)); p != "h2" {
		t.Fatalf("the browser got %s over %q, want h2", page, p)
	}

	u, _ := url.Parse(page)
	cookies := browserCookies(t, b, page)
	var session *network.Cookie
	for _, c := range cookies {
		switch {
		case c.Name == "__Host-tuna-session":
			session = c
		case strings.Contains(c.Name, "tuna-"):
			t.Errorf("the browser keeps the edge's cookie %s after the login", c.Name)
		}
	}
	if session == nil {
		t.Fatalf("no __Host-tuna-session cookie for %s; the browser has %v", page, names(cookies))
	}
	if !session.Secure || !session.HTTPOnly || session.SameSite != network.CookieSameSiteLax || session.Path != "/" {
		t.Errorf("session cookie: Secure %v, HttpOnly %v, SameSite %q, Path %q; want Secure, HttpOnly, Lax, /",
			session.Secure, session.HTTPOnly, session.SameSite, session.Path)
	}
	if session.Domain != u.Hostname() {
		t.Errorf("session cookie's domain %q: want the exact host %s (no Domain attribute)", session.Domain, u.Hostname())
	}
	if c := browser.Get(t, b, "document.cookie", chromedp.Evaluate[string]("document.cookie")); strings.Contains(c, "tuna-session") {
		t.Errorf("a page's script reads the session cookie: %q", c)
	}

	// Per host: the next host of the edge gets no cookie of this one and
	// asks for its own login.
	other := w.tlsOrigin("other") + "/"
	for _, c := range browserCookies(t, b, other) {
		if strings.Contains(c.Name, "tuna-session") {
			t.Errorf("the browser sends %s's session cookie to %s", u.Hostname(), other)
		}
	}
	browser.Do(t, b, "open the other host", chromedp.Navigate(other), chromedp.WaitVisible("#username"))
	if loc := browser.Get(t, b, "location", chromedp.Location()); !strings.HasPrefix(loc, w.op.Issuer+"/") {
		t.Fatalf("another host with the first host's session went to %s, not to the provider", loc)
	}
}

// browserCookies are the cookies the browser would send to target.
func browserCookies(t *testing.T, b context.Context, target string) []*network.Cookie {
	t.Helper()
	ctx, cancel := context.WithTimeout(b, 30*time.Second)
	defer cancel()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{target}})
	if err != nil {
		t.Fatalf("reading the browser's cookies for %s: %v", target, err)
	}
	return res.Cookies
}

func names(cs []*network.Cookie) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}
