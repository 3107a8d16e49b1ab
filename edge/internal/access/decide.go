package access

import (
	"strings"
	"time"
)

// request is what a decision looks at, the same whichever server read
// the request.
type request struct {
	method string
	// target is the request target as sent; path is its path.
	target, path string
	// host is the normalised host the policy protects; authority is the
	// Host the client sent (the same string when it is already normal),
	// which with secure makes the origin the client reached.
	host, authority string
	secure          bool
	// remote is the client's address, without the port.
	remote        string
	cookie        string
	authorization string
}

// origin is scheme://authority as the client reached it: where its
// redirects go and whom its assertions are issued by.
func (r *request) origin() string {
	if r.secure {
		return "https://" + r.authority
	}
	return "http://" + r.authority
}

// verdict is what a policy decided about one request.
type verdict int

const (
	// pass: forward, with the identity when there is one.
	pass verdict = iota
	// login: an oidc rule asks for a login.
	login
	// challenge: a basic auth rule asks for credentials (401).
	challenge
	// wrongPassword: basic auth credentials that do not check out (401).
	wrongPassword
	// deny: a deny or ip rule refuses (403, the deny page).
	deny
	// notAllowed: a login whose identity no rule admits (403).
	notAllowed
	// needLink: only a shared link opens this (403).
	needLink
	// limited: over a rate limit, or too many wrong passwords (429).
	limited
	// maintenance: the policy answers 503 with the maintenance page.
	maintenance
	// deferred: the relay leaves the request to net/http, which decides
	// with the work the relay does not do (bcrypt).
	deferred
)

type decision struct {
	verdict verdict
	// rule decided, or asked first for an identity.
	rule *rule
	// session or user is the identity that passed, or was refused.
	session *Session
	user    string
	wait    time.Duration
	// cookieSeen: the request carried a session cookie (valid or not).
	cookieSeen bool
}

// identity returns who passed: a session, or a basic auth user as one.
func (d *decision) identity() *Session {
	if d.session != nil {
		return d.session
	}
	if d.user != "" {
		return &Session{Method: MethodBasic, Subject: d.user, ID: "basic:" + d.user}
	}
	return nil
}

// decide runs the rules in order (docs/access.md#how-rules-decide). With
// relay set, it passes what it can and defers the rest to net/http
// without counting it: no wrong password counted, no rate limit taken for
// a request it does not pass. It does check new basic credentials
// (bcrypt, within the guard's slots), so that a client with the right
// password stays on the relay.
func (p *Policy) decide(e *Engine, r *request, kr *keyring, now time.Time, relay bool) decision {
	if p.maintenance {
		return decision{verdict: maintenance}
	}
	var sess *Session
	seen := false
	if p.sessions {
		if v, ok := cookieValue(r.cookie, sessionCookieName(r.secure)); ok {
			// A cookie that does not open (forged, another host's, expired)
			// is as none: the request is asked to log in again.
			seen = true
			sess, _ = kr.openSession(r.host, v, now)
		}
	}
	var first *decision
	refuse := func(d decision) {
		if first == nil {
			d.cookieSeen = seen
			first = &d
		}
	}
	for _, ru := range p.rules {
		if !ru.applies(r.method, r.path) {
			continue
		}
		switch ru.kind {
		case rulePublic:
			return p.limit(decision{verdict: pass, rule: ru, cookieSeen: seen}, r, now, relay)
		case ruleDeny:
			return decision{verdict: deny, rule: ru, cookieSeen: seen}
		case ruleIP:
			if !ru.ip.AllowedAddr(r.remote) {
				return decision{verdict: deny, rule: ru, cookieSeen: seen}
			}
		case ruleOIDC:
			switch {
			case sess == nil || sess.Method != MethodOIDC || sess.Provider != ru.oidc.id:
				refuse(decision{verdict: login, rule: ru})
			case ru.oidc.allows(sess):
				return p.limit(decision{verdict: pass, rule: ru, session: sess, cookieSeen: seen}, r, now, relay)
			default:
				refuse(decision{verdict: notAllowed, rule: ru, session: sess})
			}
		case ruleLinks:
			if sess != nil && sess.Method == MethodLink && sess.Provider == ru.links.id && strings.HasPrefix(r.path, sess.Scope) {
				return p.limit(decision{verdict: pass, rule: ru, session: sess, cookieSeen: seen}, r, now, relay)
			}
			refuse(decision{verdict: needLink, rule: ru})
		case ruleBasic:
			out, user, wait := ru.basic.check(e.guard, r.authorization, r.remote, now, relay)
			switch {
			case out == basicOK:
				return p.limit(decision{verdict: pass, rule: ru, user: user, cookieSeen: seen}, r, now, relay)
			case out == basicNone:
				refuse(decision{verdict: challenge, rule: ru})
			case relay:
				// A wrong password or a limit: net/http answers it.
				return decision{verdict: deferred}
			case out == basicLimited:
				return decision{verdict: limited, rule: ru, wait: wait}
			default:
				refuse(decision{verdict: wrongPassword, rule: ru})
			}
		}
	}
	if first != nil {
		if relay {
			return decision{verdict: deferred}
		}
		if first.verdict != limited && p.perIP != nil {
			// A refusal spends the client's budget too, so that
			// anonymous requests are limited as much as others.
			if ok, wait := p.perIP.take(r.remote, now); !ok {
				return decision{verdict: limited, wait: wait}
			}
		}
		return *first
	}
	return p.limit(decision{verdict: pass, cookieSeen: seen}, r, now, relay)
}

// limit applies the rate limits to a request the rules passed: per client
// address, then per identity.
func (p *Policy) limit(d decision, r *request, now time.Time, relay bool) decision {
	if p.perIP != nil {
		if ok, wait := p.perIP.take(r.remote, now); !ok {
			if relay {
				return decision{verdict: deferred}
			}
			return decision{verdict: limited, wait: wait, rule: d.rule}
		}
	}
	if id := d.identity(); id != nil && p.perUser != nil {
		if ok, wait := p.perUser.take(id.Method.String()+":"+id.Subject, now); !ok {
			if relay {
				return decision{verdict: deferred}
			}
			return decision{verdict: limited, wait: wait, rule: d.rule}
		}
	}
	return d
}
