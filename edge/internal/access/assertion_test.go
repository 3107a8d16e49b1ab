package access

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/internal/h1"
)

// The assertion the relay sets verifies with the key the edge publishes
// under the kid of its header, and says who, for which origin and host,
// until when: never past the session. A changed claim no longer verifies.
func TestAssertionVerifiesWithThePublishedKey(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	e := New(Config{Now: func() time.Time { return now }})
	keys, err := NewKeys(now)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetKeys(keys); err != nil {
		t.Fatal(err)
	}
	p, err := Compile(apiwire.AccessPolicy{Owner: "o", Name: "staff", Rules: []apiwire.AccessRule{{OIDC: &apiwire.OIDCRule{
		IssuerURL: "https://idp.example.com", ClientID: "c", ClientSecret: "s"}}}}, e)
	if err != nil {
		t.Fatal(err)
	}
	e.Put(p)
	sess := &Session{Method: MethodOIDC, Provider: p.rules[0].oidc.id, Issued: now, Expires: now.Add(2 * time.Minute),
		ID: "sid-1", Subject: "u1", Email: "alice@example.com", Name: "Alice", Groups: []string{"staff", "ops"}}
	v, err := e.keys.Load().sealSession("app.example.com", sess)
	if err != nil {
		t.Fatal(err)
	}
	hd := &h1.Head{Method: []byte("GET"), Target: []byte("/"), Host: []byte("App.Example.com:8443"),
		Fields: []h1.Field{{Name: []byte("Cookie"), Value: []byte("__Host-tuna-session=" + v)}}}
	ed, ok := e.Relay("o/staff", "app.example.com", hd, "192.0.2.1:1000", true)
	if !ok {
		t.Fatal("the relay did not take a valid session")
	}
	got := map[string]string{}
	for _, f := range ed.Set {
		got[string(f.Name)] = string(f.Value)
	}
	for name, want := range map[string]string{"X-Tuna-User": "alice@example.com", "X-Tuna-Email": "alice@example.com", "X-Tuna-Groups": "staff,ops"} {
		if got[name] != want {
			t.Errorf("%s: %q, want %q", name, got[name], want)
		}
	}
	parts := strings.Split(got["X-Tuna-Assertion"], ".")
	if len(parts) != 3 {
		t.Fatalf("the assertion is not a JWS in compact form: %q", got["X-Tuna-Assertion"])
	}
	var header map[string]string
	decodeSegment(t, parts[0], &header)
	if header["alg"] != "ES256" || header["kid"] == "" || len(header) != 2 {
		t.Errorf("the header: %v", header)
	}
	pub := publishedKey(t, e.JWKS(), header["kid"])
	if !verifyES256(pub, parts[0]+"."+parts[1], parts[2]) {
		t.Fatal("the assertion does not verify with the published key")
	}
	var c Claims
	decodeSegment(t, parts[1], &c)
	want := Claims{Issuer: "https://App.Example.com:8443/.tuna", Audience: "app.example.com", Subject: "u1", Email: "alice@example.com",
		Name: "Alice", Groups: []string{"staff", "ops"}, Method: "oidc", Policy: "staff", Session: "sid-1",
		IssuedAt: now.Unix(), Expires: sess.Expires.Unix()}
	if c.Issuer != want.Issuer || c.Audience != want.Audience || c.Subject != want.Subject || c.Email != want.Email ||
		c.Name != want.Name || !slices.Equal(c.Groups, want.Groups) || c.Method != want.Method || c.Policy != want.Policy ||
		c.Session != want.Session || c.IssuedAt != want.IssuedAt || c.Expires != want.Expires {
		t.Errorf("the claims:\n got %+v\nwant %+v", c, want)
	}

	// Another subject under the same signature does not verify.
	c.Subject = "admin"
	forged, _ := json.Marshal(c)
	if verifyES256(pub, parts[0]+"."+b64.EncodeToString(forged), parts[2]) {
		t.Error("a changed payload verified")
	}
}

func decodeSegment(t *testing.T, seg string, into any) {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		t.Fatalf("segment %q: %v", seg, err)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		t.Fatalf("segment %s: %v", raw, err)
	}
}

// publishedKey is the P-256 key of the JWKS named kid.
func publishedKey(t *testing.T, jwks []byte, kid string) *ecdsa.PublicKey {
	t.Helper()
	var set struct {
		Keys []struct{ Kty, Crv, X, Y, Kid, Alg string }
	}
	if err := json.Unmarshal(jwks, &set); err != nil {
		t.Fatal(err)
	}
	for _, k := range set.Keys {
		if k.Kid != kid {
			continue
		}
		if k.Kty != "EC" || k.Crv != "P-256" || k.Alg != "ES256" {
			t.Fatalf("key %s: %+v", kid, k)
		}
		x, errX := base64.RawURLEncoding.DecodeString(k.X)
		y, errY := base64.RawURLEncoding.DecodeString(k.Y)
		if errX != nil || errY != nil {
			t.Fatalf("key %s: %v %v", kid, errX, errY)
		}
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			t.Fatalf("key %s: %v", kid, err)
		}
		return pub
	}
	t.Fatalf("no key %q in the JWKS %s", kid, jwks)
	return nil
}

func verifyES256(pub *ecdsa.PublicKey, signing, sig string) bool {
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || len(raw) != 64 {
		return false
	}
	sum := sha256.Sum256([]byte(signing))
	return ecdsa.Verify(pub, sum[:], new(big.Int).SetBytes(raw[:32]), new(big.Int).SetBytes(raw[32:]))
}
