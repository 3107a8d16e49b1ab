package access

import (
	"bytes"
	"slices"
	"strings"

	"code.tuna.am/tuna/k8s-operator/internal/h1"
	"code.tuna.am/tuna/k8s-operator/internal/httprule"
)

// Edits are what the relay changes in a request a policy let through,
// and in its answer.
type Edits struct {
	Set  []h1.Field
	Drop []string
	// ResponseSet and ResponseDrop edit the final answer.
	ResponseSet  []h1.Field
	ResponseDrop []string
}

// Apply adds the edits to a route that already sets the forwarding
// fields and drops the edge's fields.
func (ed *Edits) Apply(rt *h1.Route) {
	rt.Set = append(rt.Set, ed.Set...)
	rt.Drop = ed.Drop
	rt.ResponseSet, rt.ResponseDrop = ed.ResponseSet, ed.ResponseDrop
}

// relayLists are a policy's fixed edits in the relay's form, made once.
type relayLists struct {
	set []h1.Field
	// dropLists[cookie][authorization] are the fields to drop, with the
	// Cookie field (the request carried an edge cookie) and the
	// Authorization field (basic credentials that passed).
	dropLists [2][2][]string
	respSet   []h1.Field
	respDrop  []string
}

var (
	cookieName        = []byte("Cookie")
	authorizationName = []byte("Authorization")
	identityNames     = [...][]byte{[]byte(httprule.IdentityUser), []byte(httprule.IdentityEmail),
		[]byte(httprule.IdentityGroups), []byte(httprule.IdentityAssertion)}
)

func (p *Policy) relayLists() relayLists {
	var l relayLists
	drop := httprule.EdgeFields()
	for _, f := range p.reqSet {
		l.set = append(l.set, h1.Field{Name: []byte(f[0]), Value: []byte(f[1])})
		drop = append(drop, strings.ToLower(f[0]))
	}
	drop = append(drop, p.reqRemove...)
	for cookie, extra := range [][]string{nil, {"cookie"}} {
		l.dropLists[cookie][0] = slices.Clip(append(slices.Clone(drop), extra...))
		l.dropLists[cookie][1] = slices.Clip(append(slices.Clone(drop), append(extra, "authorization")...))
	}
	for _, f := range p.respSet {
		l.respSet = append(l.respSet, h1.Field{Name: []byte(f[0]), Value: []byte(f[1])})
		l.respDrop = append(l.respDrop, strings.ToLower(f[0]))
	}
	l.respDrop = append(l.respDrop, p.respRemove...)
	return l
}

// Relay decides a request the h1 relay read, for an address guarded by
// the policy id. It lets through only what it can decide at once: a
// request the rules pass without a login (public paths, an ip rule), with
// a session cookie that opens (one AEAD open, no network call), or with
// basic credentials checked right a moment ago. Everything else returns
// false, and net/http serves the connection from this request on (Serve):
// logins, callbacks, links, the first check of a password, refusals and
// limits, the /.tuna/ paths, and a missing policy. host is the head's
// Host, normalised (names.Normalize), as the caller routed it. secure says
// the request came over TLS: it names the session cookie and the origin
// the assertion is issued for, as Serve's secure does.
func (e *Engine) Relay(id, host string, hd *h1.Head, remote string, secure bool) (Edits, bool) {
	if e == nil {
		return Edits{}, false
	}
	p, kr := e.Lookup(id), e.keys.Load()
	if p == nil || kr == nil {
		return Edits{}, false
	}
	path, ok := targetPath(hd.Target)
	if !ok || strings.HasPrefix(path, Prefix) || !normalPath(path) {
		return Edits{}, false
	}
	// The Host as sent is most often the normal one: the same string then.
	authority := host
	if string(hd.Host) != host {
		authority = string(hd.Host)
	}
	// No target: the relay never sends a request to log in.
	req := &request{method: methodString(hd.Method), path: path, host: host, authority: authority, secure: secure, remote: hostOnly(remote)}
	cookies := 0
	for _, f := range hd.Fields {
		switch {
		case bytes.EqualFold(f.Name, cookieName):
			if cookies > 0 {
				req.cookie += "; "
			}
			req.cookie += string(f.Value)
			cookies++
		case bytes.EqualFold(f.Name, authorizationName):
			req.authorization = string(f.Value)
		}
	}
	now := e.cfg.Now()
	d := p.decide(e, req, kr, now, true)
	if d.verdict != pass {
		return Edits{}, false
	}
	l := p.relay
	ed := Edits{ResponseSet: l.respSet, ResponseDrop: l.respDrop}
	var who []h1.Field
	if p.identity {
		if id := d.identity(); id != nil {
			if f := e.identity(p, kr, req, id, now); f != nil {
				who = f.fields
			}
		}
	}
	// The cached identity fields and the policy's are shared: clipped,
	// so that an append copies them rather than write into them.
	switch {
	case len(l.set) == 0:
		ed.Set = who[:len(who):len(who)]
	case len(who) == 0:
		ed.Set = l.set[:len(l.set):len(l.set)]
	default:
		ed.Set = append(append(make([]h1.Field, 0, len(who)+len(l.set)+1), who...), l.set...)
	}
	dropCookie, dropAuth := 0, 0
	if strings.Contains(req.cookie, "tuna-") {
		if kept, found := stripOwnCookies(req.cookie); found {
			dropCookie = 1
			if kept != "" {
				ed.Set = append(ed.Set, h1.Field{Name: cookieName, Value: []byte(kept)})
			}
		}
	}
	if d.user != "" {
		dropAuth = 1
	}
	ed.Drop = l.dropLists[dropCookie][dropAuth]
	return ed, true
}

// methodString is the method as a string, the common ones without an
// allocation.
func methodString(m []byte) string {
	for _, known := range [...]string{"GET", "POST", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"} {
		if string(m) == known {
			return known
		}
	}
	return string(m)
}

// identityName is the canonical name as bytes, without an allocation.
func identityName(name string) []byte {
	for _, n := range identityNames {
		if string(n) == name {
			return n
		}
	}
	return []byte(name)
}

// targetPath is the escaped path of a request target in origin form or
// absolute form.
func targetPath(t []byte) (string, bool) {
	s := string(t)
	if !strings.HasPrefix(s, "/") {
		rest, ok := strings.CutPrefix(s, "http://")
		if !ok {
			if rest, ok = strings.CutPrefix(s, "https://"); !ok {
				return "", false
			}
		}
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return "/", true
		}
		s = rest[i:]
	}
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	return s, true
}
