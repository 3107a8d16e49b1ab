package access

import (
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// oidcPolicy compiles and puts a policy of one OIDC rule, and returns it
// as the engine holds it.
func oidcPolicy(t *testing.T, e *Engine, rule apiwire.OIDCRule, limits *apiwire.AccessRateLimits) *Policy {
	t.Helper()
	rule.ClientSecret = "s"
	p, err := Compile(apiwire.AccessPolicy{Owner: "o", Name: "n", Rules: []apiwire.AccessRule{{OIDC: &rule}}, RateLimits: limits}, e)
	if err != nil {
		t.Fatal(err)
	}
	e.Put(p)
	return e.Lookup("o/n")
}

// cookieOf seals a session of p's OIDC rule for host "h", as a login
// through that rule would make it.
func cookieOf(t *testing.T, e *Engine, p *Policy, now time.Time, subject, email string, groups ...string) string {
	t.Helper()
	v, err := e.keys.Load().sealSession("h", &Session{Method: MethodOIDC, Provider: p.rules[0].oidc.id, Issued: now,
		Expires: now.Add(time.Hour), ID: "sid-" + subject, Subject: subject, Email: email, Groups: groups})
	if err != nil {
		t.Fatal(err)
	}
	return sessionCookie + "=" + v
}

func decideWithCookie(e *Engine, p *Policy, cookie, remote string, now time.Time) decision {
	return p.decide(e, &request{method: "GET", path: "/", target: "/", host: "h", authority: "h", remote: remote, cookie: cookie},
		e.keys.Load(), now, false)
}

func oidcEngine(t *testing.T, now time.Time) *Engine {
	t.Helper()
	e := New(Config{Now: func() time.Time { return now }})
	k, err := NewKeys(now)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetKeys(k); err != nil {
		t.Fatal(err)
	}
	return e
}

// The allowed lists admit by e-mail, by domain or by group, and are read
// at every request: a user taken off a list is refused with the next
// request, on the cookie the login gave, without a new login.
func TestOIDCListsAreCheckedOnEveryRequest(t *testing.T) {
	now := time.Now()
	e := oidcEngine(t, now)
	rule := apiwire.OIDCRule{IssuerURL: "https://idp.example.com", ClientID: "c",
		AllowedEmails: []string{"Alice@Example.com"}, AllowedDomains: []string{"partner.example"}, AllowedGroups: []string{"ops"}}
	p := oidcPolicy(t, e, rule, nil)
	alice := cookieOf(t, e, p, now, "u-alice", "alice@example.com")
	carol := cookieOf(t, e, p, now, "u-carol", "carol@partner.example")
	bob := cookieOf(t, e, p, now, "u-bob", "bob@elsewhere.example", "staff", "ops")
	mallory := cookieOf(t, e, p, now, "u-mallory", "mallory@elsewhere.example", "staff")
	// No e-mail (the provider's was not verified, sessionFrom): only a
	// group can admit it.
	nomail := cookieOf(t, e, p, now, "u-nomail", "", "staff")
	for _, tc := range []struct {
		who, cookie string
		want        verdict
	}{
		{"alice, by e-mail (case folded)", alice, pass},
		{"carol, by domain", carol, pass},
		{"bob, by group", bob, pass},
		{"mallory, in no list", mallory, notAllowed},
		{"a session without an e-mail, in no group", nomail, notAllowed},
		{"no cookie", "", login},
	} {
		if d := decideWithCookie(e, p, tc.cookie, "192.0.2.1", now); d.verdict != tc.want {
			t.Errorf("%s: verdict %d, want %d", tc.who, d.verdict, tc.want)
		}
	}

	// Alice and the ops group are taken off; the issuer, client and claims
	// are unchanged, so the sessions stay this rule's.
	rule.AllowedEmails, rule.AllowedGroups = []string{"someone@example.com"}, []string{"admins"}
	p = oidcPolicy(t, e, rule, nil)
	for _, tc := range []struct {
		who, cookie string
		want        verdict
	}{
		{"alice, taken off the e-mails", alice, notAllowed},
		{"bob, whose group was taken off", bob, notAllowed},
		{"carol, still in the domain", carol, pass},
	} {
		if d := decideWithCookie(e, p, tc.cookie, "192.0.2.1", now); d.verdict != tc.want {
			t.Errorf("after the change, %s: verdict %d, want %d", tc.who, d.verdict, tc.want)
		}
	}
}

// A session is its rule's provider's: changing the rule's issuer, client
// or allowed claims ends the sessions it made (the next request logs in
// again), while changing only the lists keeps them.
func TestChangingIssuerClientOrClaimsEndsSessions(t *testing.T) {
	now := time.Now()
	base := apiwire.OIDCRule{IssuerURL: "https://idp.example.com", ClientID: "c",
		AllowedClaims: []apiwire.ClaimMatch{{Name: "hd", Values: []string{"example.com"}}}}
	for _, tc := range []struct {
		name   string
		change func(*apiwire.OIDCRule)
		want   verdict
	}{
		{"another issuer", func(r *apiwire.OIDCRule) { r.IssuerURL = "https://other-idp.example.com" }, login},
		{"another client", func(r *apiwire.OIDCRule) { r.ClientID = "c2" }, login},
		{"other allowed claims", func(r *apiwire.OIDCRule) { r.AllowedClaims[0].Values = []string{"example.org"} }, login},
		{"a list only", func(r *apiwire.OIDCRule) { r.AllowedDomains = []string{"example.com"} }, pass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := oidcEngine(t, now)
			rule := base
			rule.AllowedClaims = []apiwire.ClaimMatch{{Name: "hd", Values: []string{"example.com"}}}
			p := oidcPolicy(t, e, rule, nil)
			alice := cookieOf(t, e, p, now, "u-alice", "alice@example.com")
			if d := decideWithCookie(e, p, alice, "192.0.2.1", now); d.verdict != pass {
				t.Fatalf("before the change: verdict %d, want pass", d.verdict)
			}
			tc.change(&rule)
			p = oidcPolicy(t, e, rule, nil)
			if d := decideWithCookie(e, p, alice, "192.0.2.1", now); d.verdict != tc.want {
				t.Fatalf("after the change: verdict %d, want %d", d.verdict, tc.want)
			}
		})
	}
}

// An e-mail the provider marks as not verified is not taken into the
// session, so no e-mail list or domain admits it; allowed claims are
// checked at login against the ID token's claims, of any JSON shape the
// providers use.
func TestUnverifiedEmailAndAllowedClaims(t *testing.T) {
	e := oidcEngine(t, time.Now())
	p := oidcPolicy(t, e, apiwire.OIDCRule{IssuerURL: "https://idp.example.com", ClientID: "c",
		AllowedClaims: []apiwire.ClaimMatch{{Name: "hd", Values: []string{"example.com"}}, {Name: "roles", Values: []string{"admin"}}}}, nil)
	o := p.rules[0].oidc
	for _, tc := range []struct {
		verified any
		want     string
	}{
		{false, ""},
		{"false", ""},
		{true, "eve@example.com"},
		{nil, "eve@example.com"}, // absent: the provider does not say
	} {
		claims := map[string]any{"sub": "u-eve", "email": "eve@example.com"}
		if tc.verified != nil {
			claims["email_verified"] = tc.verified
		}
		if s := o.sessionFrom(claims); s.Email != tc.want {
			t.Errorf("email_verified %v: session e-mail %q, want %q", tc.verified, s.Email, tc.want)
		}
	}
	for _, tc := range []struct {
		name   string
		claims map[string]any
		want   bool
	}{
		{"both claims", map[string]any{"hd": "example.com", "roles": []any{"dev", "admin"}}, true},
		{"a role missing", map[string]any{"hd": "example.com", "roles": []any{"dev"}}, false},
		{"another domain", map[string]any{"hd": "example.org", "roles": []any{"admin"}}, false},
		{"a claim absent", map[string]any{"roles": []any{"admin"}}, false},
		{"a claim of another type", map[string]any{"hd": 7, "roles": []any{"admin"}}, false},
	} {
		if got := o.claimsAllow(tc.claims); got != tc.want {
			t.Errorf("%s: claimsAllow = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The per-identity limit counts each signed-in user on their own: one
// user past it gets 429 with a wait, from any address, while another user
// and the same user's next period pass.
func TestPerIdentityRateLimit(t *testing.T) {
	now := time.Now()
	e := oidcEngine(t, now)
	p := oidcPolicy(t, e, apiwire.OIDCRule{IssuerURL: "https://idp.example.com", ClientID: "c"},
		&apiwire.AccessRateLimits{PerIdentity: &apiwire.RequestRate{Requests: 2, PeriodSeconds: 60}})
	alice := cookieOf(t, e, p, now, "u-alice", "alice@example.com")
	bob := cookieOf(t, e, p, now, "u-bob", "bob@example.com")
	for i, remote := range []string{"192.0.2.1", "198.51.100.9"} {
		if d := decideWithCookie(e, p, alice, remote, now); d.verdict != pass {
			t.Fatalf("alice's request %d: verdict %d, want pass", i+1, d.verdict)
		}
	}
	d := decideWithCookie(e, p, alice, "203.0.113.5", now)
	if d.verdict != limited || d.wait <= 0 {
		t.Fatalf("alice past her budget from a third address: verdict %d wait %v, want limited with a wait", d.verdict, d.wait)
	}
	if d := decideWithCookie(e, p, bob, "192.0.2.1", now); d.verdict != pass {
		t.Fatalf("bob, from alice's address: verdict %d, want pass", d.verdict)
	}
	if d := decideWithCookie(e, p, alice, "192.0.2.1", now.Add(31*time.Second)); d.verdict != pass {
		t.Fatalf("alice once a request's worth of the period passed: verdict %d, want pass", d.verdict)
	}
}
