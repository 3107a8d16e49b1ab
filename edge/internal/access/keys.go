package access

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Keys are the edge's access keys, one set for the whole edge (every node
// of a cluster reads the same from the shared state): session keys seal
// the session and login cookies (AES-256-GCM), assertion keys sign the
// identity assertions (ECDSA P-256, ES256). The first of each is in use;
// the others still open cookies and verify assertions made before the
// last rotation. They are stored sealed by the edge's secrets keyring.
type Keys struct {
	Sessions   [][]byte  `json:"sessions"`
	Assertions [][]byte  `json:"assertions"` // PKCS #8 DER
	RotatedAt  time.Time `json:"rotated_at"`
}

// KeepKeys is how many keys of each kind a rotation keeps: the new one
// and the one before, so that a session made just before a rotation lives
// on, and one made before the rotation before that ends.
const KeepKeys = 2

// NewKeys makes a first set of keys.
func NewKeys(now time.Time) (Keys, error) {
	return Keys{}.Rotate(now)
}

// Rotate returns k with a new key of each kind in front, keeping
// KeepKeys of each.
func (k Keys) Rotate(now time.Time) (Keys, error) {
	sk := make([]byte, 32)
	if _, err := rand.Read(sk); err != nil {
		return k, err
	}
	ak, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return k, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(ak)
	if err != nil {
		return k, err
	}
	out := Keys{RotatedAt: now.UTC()}
	out.Sessions = append([][]byte{sk}, k.Sessions...)
	out.Assertions = append([][]byte{der}, k.Assertions...)
	out.Sessions = out.Sessions[:min(len(out.Sessions), KeepKeys)]
	out.Assertions = out.Assertions[:min(len(out.Assertions), KeepKeys)]
	return out, nil
}

// keyring is Keys ready to use: immutable, swapped whole on a change.
type keyring struct {
	// sealing is the session key in use; opening finds a key by the id
	// a cookie carries.
	sealing *sessionKey
	opening map[uint32]*sessionKey
	sign    *assertionKey
	// jwks is the JSON Web Key Set of every assertion key.
	jwks []byte
	ids  struct{ sessions, assertions []string }
	// opened holds the sessions of cookies this keyring has opened: a
	// visitor sends the same cookie with every request, and opening it
	// (AES-GCM and decoding) was most of what a request with a session
	// cost the edge. It goes with the keyring, so a key change empties it.
	opened openedSessions
}

type sessionKey struct {
	id   uint32
	aead cipher.AEAD
}

type assertionKey struct {
	kid string
	key *ecdsa.PrivateKey
	// head is the encoded JOSE header of its assertions.
	head string
}

func newKeyring(k Keys) (*keyring, error) {
	if len(k.Sessions) == 0 || len(k.Assertions) == 0 {
		return nil, fmt.Errorf("the access keys are incomplete: %d session keys, %d assertion keys", len(k.Sessions), len(k.Assertions))
	}
	r := &keyring{opening: map[uint32]*sessionKey{}, opened: openedSessions{m: map[openedKey]*Session{}}}
	for i, raw := range k.Sessions {
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, fmt.Errorf("session key #%d: %w", i+1, err)
		}
		gcm, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(raw)
		sk := &sessionKey{id: binary.BigEndian.Uint32(sum[:4]), aead: gcm}
		if i == 0 {
			r.sealing = sk
		}
		r.opening[sk.id] = sk
		r.ids.sessions = append(r.ids.sessions, hex.EncodeToString(sum[:4]))
	}
	type jwk struct {
		Kty string `json:"kty"`
		Crv string `json:"crv"`
		X   string `json:"x"`
		Y   string `json:"y"`
		Kid string `json:"kid"`
		Alg string `json:"alg"`
		Use string `json:"use"`
	}
	var set struct {
		Keys []jwk `json:"keys"`
	}
	for i, der := range k.Assertions {
		parsed, err := x509.ParsePKCS8PrivateKey(der)
		if err != nil {
			return nil, fmt.Errorf("assertion key #%d: %w", i+1, err)
		}
		ec, ok := parsed.(*ecdsa.PrivateKey)
		if !ok || ec.Curve != elliptic.P256() {
			return nil, fmt.Errorf("assertion key #%d is not an ECDSA P-256 key", i+1)
		}
		pub, err := ec.PublicKey.Bytes() // 0x04 || X || Y
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(pub)
		kid := hex.EncodeToString(sum[:8])
		if i == 0 {
			head, err := joseHeader(kid)
			if err != nil {
				return nil, err
			}
			r.sign = &assertionKey{kid: kid, key: ec, head: head}
		}
		enc := base64.RawURLEncoding
		set.Keys = append(set.Keys, jwk{Kty: "EC", Crv: "P-256", X: enc.EncodeToString(pub[1:33]), Y: enc.EncodeToString(pub[33:]),
			Kid: kid, Alg: "ES256", Use: "sig"})
		r.ids.assertions = append(r.ids.assertions, kid)
	}
	var err error
	if r.jwks, err = json.Marshal(set); err != nil {
		return nil, err
	}
	return r, nil
}
