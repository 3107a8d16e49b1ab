package access

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"
)

// The assertion is a JWT (ES256) the edge adds to a request it let
// through after a login, so that a backend can trust the identity without
// trusting the network: it checks the signature with the keys the edge
// publishes (JWKS at <issuer>/jwks.json, and GET /v1/access/jwks), that
// aud is its host and that exp has not passed.
//
// Signing costs tens of microseconds, so an assertion is made once per
// session and host and kept until less than assertionRenew of its life is
// left: a request with a valid session pays a map lookup, not a signature.
const (
	assertionLifetime = 5 * time.Minute
	assertionRenew    = time.Minute
	maxAssertions     = 1 << 15
)

// AssertionPath is where a protected host publishes the keys that verify
// its assertions; the issuer of its assertions is the part before
// "/jwks.json".
const (
	AssertionIssuerPath = "/.tuna"
	JWKSPath            = AssertionIssuerPath + "/jwks.json"
)

// Claims are an assertion's claims.
type Claims struct {
	Issuer   string   `json:"iss"`
	Audience string   `json:"aud"`
	Subject  string   `json:"sub"`
	Email    string   `json:"email,omitempty"`
	Name     string   `json:"name,omitempty"`
	Groups   []string `json:"groups,omitempty"`
	Method   string   `json:"amr_tuna"`
	Policy   string   `json:"policy"`
	Session  string   `json:"sid,omitempty"`
	IssuedAt int64    `json:"iat"`
	Expires  int64    `json:"exp"`
}

type assertions struct {
	mu    sync.Mutex
	cache map[string]cachedAssertion
}

type cachedAssertion struct {
	jwt   string
	until time.Time
	kid   string
}

// assertion returns the JWT for an identity on host, from the cache when
// one with enough life left was signed with the key in use.
func (a *assertions) assertion(r *keyring, key string, c Claims, now time.Time) (string, error) {
	a.mu.Lock()
	got, ok := a.cache[key]
	a.mu.Unlock()
	if ok && got.kid == r.sign.kid && now.Add(assertionRenew).Before(got.until) {
		return got.jwt, nil
	}
	c.IssuedAt = now.Unix()
	exp := now.Add(assertionLifetime)
	if c.Expires != 0 && time.Unix(c.Expires, 0).Before(exp) {
		exp = time.Unix(c.Expires, 0)
	}
	c.Expires = exp.Unix()
	jwt, err := signJWT(r.sign, c)
	if err != nil {
		return "", err
	}
	a.mu.Lock()
	if len(a.cache) >= maxAssertions {
		clear(a.cache)
	}
	a.cache[key] = cachedAssertion{jwt: jwt, until: exp, kid: r.sign.kid}
	a.mu.Unlock()
	return jwt, nil
}

func signJWT(k *assertionKey, claims any) (string, error) {
	head, err := json.Marshal(struct {
		Alg string `json:"alg"`
		Typ string `json:"typ"`
		Kid string `json:"kid"`
	}{"ES256", "JWT", k.kid})
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signing := b64.EncodeToString(head) + "." + b64.EncodeToString(body)
	sum := sha256.Sum256([]byte(signing))
	rs, s, err := ecdsa.Sign(rand.Reader, k.key, sum[:])
	if err != nil {
		return "", err
	}
	sig := make([]byte, 64)
	rs.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signing + "." + b64.EncodeToString(sig), nil
}
