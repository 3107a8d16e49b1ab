package access

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// basicRule admits the users of an htpasswd file. bcrypt is slow on
// purpose (tens of milliseconds a check), so:
//   - a password's verdict is remembered for verifiedFor, under an HMAC of
//     the credentials with a key of this process: a client sending the same
//     credentials again pays a hash, not a bcrypt (so the h1 relay passes
//     them on at once, and checks new ones itself, keeping the connection);
//   - wrong passwords are limited per client address (failures: a bucket
//     of failureBurst, one back every failureEvery); past it the answer is
//     429 with Retry-After and no password is checked at all, right or
//     wrong, so guessing is slow and costs the edge nothing;
//   - at most bcryptSlots checks run at once on a node; a request that
//     finds none free is answered 429 too.
type basicRule struct {
	realm string
	users map[string][]byte
	// macKey keys the cache of verified credentials; macs are HMACs
	// under it, kept for reuse (a new one is six allocations, on every
	// request that carries credentials).
	macKey []byte
	macs   sync.Pool

	mu       sync.Mutex
	verified map[[32]byte]verified
	// refused are credentials checked wrong: the rule's users do not
	// change (an edited policy compiles a new rule), so a wrong password
	// stays wrong, and asking again costs no bcrypt. A separate bound, so
	// that guesses do not push out the right passwords.
	refused map[[32]byte]time.Time
}

type verified struct {
	user  string
	until time.Time
}

const (
	verifiedFor  = 5 * time.Minute
	maxVerified  = 4096
	maxRefused   = 1024
	failureBurst = 10
	failureEvery = 6 * time.Second
	bcryptSlots  = 4
	// slotWait is how long a check waits for a bcrypt slot before the
	// answer is 429: a burst of clients with right credentials queues
	// behind the slots instead of being refused, and a flood of guesses
	// still runs no more than bcryptSlots checks at once.
	slotWait = 2 * time.Second
)

// dummyHash is checked for unknown users, so that the time an answer
// takes does not tell which user names exist.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("tuna-access dummy"), bcrypt.DefaultCost)

// guard is an engine's defence of its basic auth rules: the wrong
// passwords per client address, for all rules, and the bcrypt slots.
type guard struct {
	failures *limiter
	slots    chan struct{}
	wait     time.Duration // slotWait
}

// acquire takes a bcrypt slot, waiting up to slotWait for one.
func (g *guard) acquire() bool {
	select {
	case g.slots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(g.wait)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

func newGuard() *guard {
	return &guard{failures: newBucket(failureBurst, failureBurst*failureEvery), slots: make(chan struct{}, bcryptSlots), wait: slotWait}
}

func compileBasic(in *apiwire.BasicAuthRule) (*basicRule, error) {
	b := &basicRule{realm: in.Realm, users: map[string][]byte{}, verified: map[[32]byte]verified{}, refused: map[[32]byte]time.Time{}, macKey: make([]byte, 32)}
	if _, err := rand.Read(b.macKey); err != nil {
		return nil, err
	}
	if b.realm == "" {
		b.realm = "restricted"
	}
	if strings.ContainsAny(b.realm, "\"\\\r\n") {
		return nil, fmt.Errorf("basic_auth: the realm may not hold quotes, backslashes or line breaks")
	}
	for i, line := range strings.Split(in.Htpasswd, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		user, hash, ok := strings.Cut(line, ":")
		if !ok || user == "" {
			return nil, fmt.Errorf("basic_auth: htpasswd line %d is not user:hash", i+1)
		}
		if _, err := bcrypt.Cost([]byte(hash)); err != nil || !isBcrypt(hash) {
			// The line is named by its number only: a Secret's value put in
			// the wrong key must not reach a status message.
			return nil, fmt.Errorf("basic_auth: the hash on htpasswd line %d is not bcrypt: only bcrypt is accepted; make the file with `htpasswd -B`", i+1)
		}
		if _, dup := b.users[user]; dup {
			return nil, fmt.Errorf("basic_auth: the user on htpasswd line %d is listed on an earlier line too", i+1)
		}
		b.users[user] = []byte(hash)
	}
	if len(b.users) == 0 {
		return nil, fmt.Errorf("basic_auth: the htpasswd file lists no user")
	}
	if len(b.users) > MaxHtpasswdUsers {
		return nil, fmt.Errorf("basic_auth: at most %d users", MaxHtpasswdUsers)
	}
	return b, nil
}

// basicOutcome is what a basic auth rule found.
type basicOutcome int

const (
	basicNone    basicOutcome = iota // no credentials
	basicOK                          // right credentials
	basicWrong                       // wrong credentials
	basicLimited                     // too many failures, or no slot: not checked
)

// check reads Basic credentials from an Authorization value and checks
// them, for a client at addr. A wrong password counts against addr, unless
// relay is set: the relay passes right credentials on and hands anything
// else to net/http, whose check counts it then (the verdict cached, so
// without a second bcrypt).
func (b *basicRule) check(g *guard, authorization, addr string, now time.Time, relay bool) (basicOutcome, string, time.Duration) {
	user, pass, ok := parseBasic(authorization)
	if !ok {
		return basicNone, "", 0
	}
	if limited, wait := g.failures.blocked(addr, now); limited {
		return basicLimited, "", wait
	}
	sum := b.sum(user, pass)
	out, who := b.known(sum, now)
	if out == basicNone {
		if !g.acquire() {
			return basicLimited, "", time.Second
		}
		out, who = b.verify(user, pass, sum, now)
		<-g.slots
	}
	if out == basicWrong && !relay {
		g.failures.take(addr, now)
	}
	return out, who, 0
}

// known is what the caches know of credentials: basicOK with the user,
// basicWrong, or basicNone when they were not checked yet.
func (b *basicRule) known(sum [32]byte, now time.Time) (basicOutcome, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if v, hit := b.verified[sum]; hit && now.Before(v.until) {
		return basicOK, v.user
	}
	if until, hit := b.refused[sum]; hit && now.Before(until) {
		return basicWrong, ""
	}
	return basicNone, ""
}

// verify runs bcrypt (the caller holds a slot) and remembers the verdict.
func (b *basicRule) verify(user, pass string, sum [32]byte, now time.Time) (basicOutcome, string) {
	// Another request may have checked the same credentials while this
	// one waited for its slot.
	if out, who := b.known(sum, now); out != basicNone {
		return out, who
	}
	hash, known := b.users[user]
	if !known {
		hash = dummyHash
	}
	err := bcrypt.CompareHashAndPassword(hash, []byte(pass))
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil || !known {
		if len(b.refused) >= maxRefused {
			clear(b.refused)
		}
		b.refused[sum] = now.Add(verifiedFor)
		return basicWrong, ""
	}
	if len(b.verified) >= maxVerified {
		clear(b.verified)
	}
	b.verified[sum] = verified{user: user, until: now.Add(verifiedFor)}
	return basicOK, user
}

func parseBasic(h string) (user, pass string, ok bool) {
	const prefix = "basic "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(h[len(prefix):]))
	if err != nil {
		return "", "", false
	}
	user, pass, ok = strings.Cut(string(raw), ":")
	return user, pass, ok
}

// credentialsMAC is an HMAC under a rule's key and the buffer its input
// is written into.
type credentialsMAC struct {
	h   hash.Hash
	buf []byte
}

func (b *basicRule) sum(user, pass string) [32]byte {
	m, _ := b.macs.Get().(*credentialsMAC)
	if m == nil {
		m = &credentialsMAC{h: hmac.New(sha256.New, b.macKey)}
	}
	m.buf = append(append(append(m.buf[:0], user...), 0), pass...)
	m.h.Reset()
	m.h.Write(m.buf)
	var sum [32]byte
	m.h.Sum(sum[:0])
	clear(m.buf) // the password does not stay in the pool
	b.macs.Put(m)
	return sum
}

// isBcrypt says whether hash has one of bcrypt's prefixes; bcrypt.Cost
// alone would also take other $2 variants.
func isBcrypt(hash string) bool {
	return strings.HasPrefix(hash, "$2a$") || strings.HasPrefix(hash, "$2b$") || strings.HasPrefix(hash, "$2y$")
}
