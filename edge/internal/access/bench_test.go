package access

import (
	"encoding/base64"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/internal/h1"
)

// BenchmarkRelayDecision is the work the h1 relay adds to a request for an
// address with a policy, the request's head already read: a valid session
// cookie of an OIDC login (one AEAD open, the identity fields and the
// cached assertion), and basic credentials checked before (an HMAC and a
// map look-up). A request without a policy never calls it
// (docs/benchmarks.md#access-policies).
//
//	go test ./edge/internal/access -run '^$' -bench RelayDecision -benchmem
func BenchmarkRelayDecision(b *testing.B) {
	now := time.Now()
	e := New(Config{Now: func() time.Time { return now }})
	k, err := NewKeys(now)
	if err != nil {
		b.Fatal(err)
	}
	if err := e.SetKeys(k); err != nil {
		b.Fatal(err)
	}
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	for _, p := range []apiwire.AccessPolicy{
		{Owner: "o", Name: "oidc", Rules: []apiwire.AccessRule{{OIDC: &apiwire.OIDCRule{IssuerURL: "https://idp.example.com", ClientID: "c", ClientSecret: "s"}}}},
		{Owner: "o", Name: "basic", Rules: []apiwire.AccessRule{{BasicAuth: &apiwire.BasicAuthRule{Htpasswd: "u:" + string(hash)}}}},
	} {
		c, err := Compile(p, e)
		if err != nil {
			b.Fatal(err)
		}
		e.Put(c)
	}
	oidc := e.Lookup("o/oidc")
	v, err := e.keys.Load().sealSession("app.example.com", &Session{Method: MethodOIDC, Provider: oidc.rules[0].oidc.id, Issued: now,
		Expires: now.Add(time.Hour), ID: "sid", Subject: "u1", Email: "alice@example.com", Name: "Alice", Groups: []string{"staff", "ops"}})
	if err != nil {
		b.Fatal(err)
	}
	head := func(name, value string) *h1.Head {
		return &h1.Head{Method: []byte("GET"), Target: []byte("/"), Host: []byte("app.example.com"), Fields: []h1.Field{
			{Name: []byte("User-Agent"), Value: []byte("bench")}, {Name: []byte("Accept"), Value: []byte("*/*")},
			{Name: []byte(name), Value: []byte(value)}}}
	}
	for _, c := range []struct {
		name, policy string
		head         *h1.Head
	}{
		{"oidc-cookie", "o/oidc", head("Cookie", "theme=dark; tuna-session="+v)},
		{"basic-auth", "o/basic", head("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("u:pw")))},
	} {
		b.Run(c.name, func(b *testing.B) {
			if _, ok := e.Relay(c.policy, "app.example.com", c.head, "192.0.2.1:4000", false); !ok {
				b.Fatal("the relay did not pass the request")
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := e.Relay(c.policy, "app.example.com", c.head, "192.0.2.1:4000", false); !ok {
					b.Fatal("the relay did not pass the request")
				}
			}
		})
	}
}
