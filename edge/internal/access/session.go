package access

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"time"
)

// Method is how a session's identity was established.
type Method uint8

// The methods a session cookie records. Basic auth makes no session: the
// credentials come with every request.
const (
	MethodOIDC  Method = 1
	MethodLink  Method = 2
	MethodBasic Method = 3
)

func (m Method) String() string {
	switch m {
	case MethodOIDC:
		return "oidc"
	case MethodLink:
		return "link"
	case MethodBasic:
		return "basic"
	}
	return "none"
}

// Session is what a session cookie holds: who, how, and until when. It is
// sealed for one host (the host is the additional data of the AEAD), so a
// cookie made for one host does not open on another.
type Session struct {
	Method  Method
	Issued  time.Time
	Expires time.Time
	// ID is random: it names the session in logs and keys its cached
	// assertion.
	ID string
	// Provider is the rule's provider that made it: an OIDC issuer and
	// client (providerID), or a links key's id.
	Provider string
	Subject  string
	Email    string
	Name     string
	Groups   []string
	// Scope is a link's path: the session opens the paths under it.
	Scope string
}

// User is the name the upstream gets as the user: the e-mail when there is
// one, else the subject.
func (s *Session) User() string {
	if s.Email != "" {
		return s.Email
	}
	return s.Subject
}

const sessionVersion = 1

var b64 = base64.RawURLEncoding

// Cookie names. On HTTPS the __Host- prefix makes the browser keep the
// cookie to the exact host, with Secure and Path=/, whatever a page of
// another subdomain sets.
const (
	sessionCookie       = "tuna-session"
	secureSessionCookie = "__Host-tuna-session"
	loginCookiePrefix   = "tuna-login-"
	secureLoginPrefix   = "__Host-tuna-login-"
)

func sessionCookieName(secure bool) string {
	if secure {
		return secureSessionCookie
	}
	return sessionCookie
}

func loginCookieName(secure bool, state string) string {
	if len(state) > 10 {
		state = state[:10]
	}
	if secure {
		return secureLoginPrefix + state
	}
	return loginCookiePrefix + state
}

// ownCookie reports whether a cookie name is one of the edge's, which the
// upstream never gets.
func ownCookie(name string) bool {
	return name == sessionCookie || name == secureSessionCookie ||
		strings.HasPrefix(name, loginCookiePrefix) || strings.HasPrefix(name, secureLoginPrefix)
}

func (s *Session) encode() []byte {
	b := make([]byte, 0, 96+len(s.Subject)+len(s.Email)+len(s.Name))
	b = append(b, sessionVersion, byte(s.Method))
	b = binary.AppendUvarint(b, uint64(s.Issued.Unix()))
	b = binary.AppendUvarint(b, uint64(s.Expires.Unix()))
	for _, f := range []string{s.ID, s.Provider, s.Subject, s.Email, s.Name, s.Scope} {
		b = appendString(b, f)
	}
	b = binary.AppendUvarint(b, uint64(len(s.Groups)))
	for _, g := range s.Groups {
		b = appendString(b, g)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errBadSession = errors.New("malformed session")

func decodeSession(b []byte) (*Session, error) {
	// One string for the whole plaintext: the fields are parts of it.
	d := decoder{b: string(b)}
	if v := d.byte(); v != sessionVersion {
		return nil, errBadSession
	}
	s := &Session{Method: Method(d.byte())}
	s.Issued = time.Unix(int64(d.uvarint()), 0)
	s.Expires = time.Unix(int64(d.uvarint()), 0)
	for _, f := range []*string{&s.ID, &s.Provider, &s.Subject, &s.Email, &s.Name, &s.Scope} {
		*f = d.string()
	}
	n := d.uvarint()
	if n > 256 || n > uint64(len(d.b)) {
		return nil, errBadSession
	}
	if n > 0 {
		s.Groups = make([]string, 0, n)
	}
	for range n {
		s.Groups = append(s.Groups, d.string())
	}
	if d.bad || len(d.b) != 0 {
		return nil, errBadSession
	}
	return s, nil
}

type decoder struct {
	b   string
	bad bool
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.bad = true
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	var v uint64
	for i := 0; i < len(d.b) && i < binary.MaxVarintLen64; i++ {
		c := d.b[i]
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				break
			}
			d.b = d.b[i+1:]
			return v | uint64(c)<<(7*i)
		}
		v |= uint64(c&0x7f) << (7 * i)
	}
	d.bad = true
	return 0
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.bad || n > uint64(len(d.b)) {
		d.bad = true
		return ""
	}
	s := d.b[:n]
	d.b = d.b[n:]
	return s
}

// Additional data of the two kinds of sealed cookies: the purpose, then
// the host, so that neither kind opens as the other or on another host.
const (
	sessionAAD = "tuna-access session v1\x00"
	loginAAD   = "tuna-access login v1\x00"
)

// seal encrypts plain for host with the key in use: the key's id, a
// random nonce and the ciphertext, in base64url.
func (r *keyring) seal(purpose, host string, plain []byte) (string, error) {
	k := r.sealing
	out := make([]byte, 4, 4+k.aead.NonceSize()+len(plain)+k.aead.Overhead())
	binary.BigEndian.PutUint32(out, k.id)
	nonce := out[4 : 4+k.aead.NonceSize()]
	out = out[:4+k.aead.NonceSize()]
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out = k.aead.Seal(out, nonce, plain, aad(purpose, host))
	return b64.EncodeToString(out), nil
}

var errSealed = errors.New("a cookie that does not open: forged, altered, made for another host, or sealed with a retired key")

// open is seal's inverse: one AEAD open, the MAC check of the cookie.
func (r *keyring) open(purpose, host, value string) ([]byte, error) {
	raw, err := b64.DecodeString(value)
	if err != nil || len(raw) < 4+12+16 {
		return nil, errSealed
	}
	k := r.opening[binary.BigEndian.Uint32(raw)]
	if k == nil {
		return nil, errSealed
	}
	ns := k.aead.NonceSize()
	plain, err := k.aead.Open(raw[4+ns:4+ns], raw[4:4+ns], raw[4+ns:], aad(purpose, host))
	if err != nil {
		return nil, errSealed
	}
	return plain, nil
}

func aad(purpose, host string) []byte {
	return append([]byte(purpose), host...)
}

// sealSession makes a session cookie's value for host.
func (r *keyring) sealSession(host string, s *Session) (string, error) {
	return r.seal(sessionAAD, host, s.encode())
}

// openSession reads a session cookie's value for host; an expired session
// is an error too. The session it returns is shared: read it, never write
// it.
func (r *keyring) openSession(host, value string, now time.Time) (*Session, error) {
	k := openedKey{host: host, value: value}
	s := r.opened.get(k)
	if s == nil {
		plain, err := r.open(sessionAAD, host, value)
		if err != nil {
			return nil, err
		}
		if s, err = decodeSession(plain); err != nil {
			return nil, err
		}
		r.opened.put(k, s)
	}
	if !now.Before(s.Expires) {
		return nil, errExpired
	}
	return s, nil
}

// maxOpened bounds the opened sessions a keyring keeps: about 1 MiB with
// cookies of a few hundred bytes. When full, it starts again empty.
const maxOpened = 4096

// openedKey is a cookie's exact value and the host it was sent to: the
// same bytes for the same host open the same way under one keyring. A
// cookie that did not open is not kept, so a forged one is checked every
// time it is sent.
type openedKey struct{ host, value string }

type openedSessions struct {
	mu sync.Mutex
	m  map[openedKey]*Session
}

func (o *openedSessions) get(k openedKey) *Session {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.m[k]
}

func (o *openedSessions) put(k openedKey, s *Session) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.m) >= maxOpened {
		clear(o.m)
	}
	o.m[k] = s
}

var errExpired = errors.New("the session expired")

// cookieValue finds a cookie in the values of Cookie fields without
// parsing the others.
func cookieValue(header, name string) (string, bool) {
	for header != "" {
		var part string
		part, header, _ = strings.Cut(header, ";")
		part = strings.TrimSpace(part)
		if n, v, ok := strings.Cut(part, "="); ok && n == name {
			return strings.Trim(v, `"`), true
		}
	}
	return "", false
}

// stripOwnCookies returns the Cookie field's value without the edge's own
// cookies, and whether there were any.
func stripOwnCookies(header string) (string, bool) {
	if !strings.Contains(header, "tuna-") {
		return header, false
	}
	// Built only when a cookie is kept: a request that carries the edge's
	// cookie alone (the usual one) costs no allocation.
	var kept strings.Builder
	found := false
	for rest := header; rest != ""; {
		var part string
		part, rest, _ = strings.Cut(rest, ";")
		p := strings.TrimSpace(part)
		if p == "" {
			continue
		}
		if n, _, _ := strings.Cut(p, "="); ownCookie(n) {
			found = true
			continue
		}
		if kept.Len() > 0 {
			kept.WriteString("; ")
		}
		kept.WriteString(p)
	}
	return kept.String(), found
}

// newID is a random identifier of n bytes, base64url.
func newID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b64.EncodeToString(b)
}
