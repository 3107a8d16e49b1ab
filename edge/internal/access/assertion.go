package access

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	"code.tuna.am/tuna/k8s-operator/internal/h1"
	"code.tuna.am/tuna/k8s-operator/internal/httprule"
)

// The assertion is a JWT (ES256) the edge adds to a request it let
// through after a login, so that a backend can trust the identity without
// trusting the network: it checks the signature with the keys the edge
// publishes (JWKS at <issuer>/jwks.json, and GET /v1/access/jwks), that
// aud is its host and that exp has not passed.
//
// Signing costs tens of microseconds, so an assertion is made once per
// session and host and kept, with the identity fields that go with it,
// until less than assertionRenew of its life is left: a request with a
// valid session pays a map look-up, not a signature.
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

// assertions caches the identity fields per identity and host, the
// signed assertion with them, in both forms the edge writes them.
type assertions struct {
	mu    sync.Mutex
	cache map[identityKey]*identityFields
}

// identityKey names an identity on a host: a session (its random id) or a
// basic auth user, under one policy, for one origin (scheme and
// authority: the assertion's issuer and audience).
type identityKey struct {
	secure            bool
	authority, policy string
	method            Method
	id                string
}

// identityFields are the fields the upstream gets for an identity, the
// assertion last: pairs for net/http, fields for the h1 relay (the same
// bytes, made once).
type identityFields struct {
	pairs  [][2]string
	fields []h1.Field
	until  time.Time
	kid    string
}

// identity returns the fields for k, from the cache when their assertion
// has enough life left and was signed with the key in use; build makes
// the fields without the assertion, and the claims to sign.
func (a *assertions) identity(r *keyring, k identityKey, now time.Time, build func() ([][2]string, Claims)) (*identityFields, error) {
	a.mu.Lock()
	got := a.cache[k]
	a.mu.Unlock()
	if got != nil && got.kid == r.sign.kid && now.Add(assertionRenew).Before(got.until) {
		return got, nil
	}
	pairs, c := build()
	c.IssuedAt = now.Unix()
	exp := now.Add(assertionLifetime)
	if c.Expires != 0 && time.Unix(c.Expires, 0).Before(exp) {
		exp = time.Unix(c.Expires, 0)
	}
	c.Expires = exp.Unix()
	jwt, err := signJWT(r.sign, c)
	if err != nil {
		return nil, err
	}
	out := &identityFields{pairs: append(pairs, [2]string{httprule.IdentityAssertion, jwt}), until: exp, kid: r.sign.kid}
	for _, f := range out.pairs {
		out.fields = append(out.fields, h1.Field{Name: identityName(f[0]), Value: []byte(f[1])})
	}
	a.mu.Lock()
	if len(a.cache) >= maxAssertions {
		clear(a.cache)
	}
	a.cache[k] = out
	a.mu.Unlock()
	return out, nil
}

// joseHeader is the encoded JOSE header of the assertions a key signs:
// the algorithm and the key's id, which the JWKS names it by. No "typ":
// it is optional (RFC 7519 section 5.1), and every request of a session
// carries the assertion.
func joseHeader(kid string) (string, error) {
	head, err := json.Marshal(struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}{"ES256", kid})
	return b64.EncodeToString(head), err
}

func signJWT(k *assertionKey, claims any) (string, error) {
	body, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signing := k.head + "." + b64.EncodeToString(body)
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
