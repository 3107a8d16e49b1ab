package access

import (
	"errors"
	"net/http"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/access/link"
)

// linksRule admits the sessions that a shared link made: a link signed
// with key, for the host, opened before its expiry and within its uses.
type linksRule struct {
	key []byte
	id  string
}

// redeemLink checks a link of the host and, when it is good, counts a use
// and makes a session scoped to the link's path.
func (e *Engine) redeemLink(w http.ResponseWriter, r *http.Request, p *Policy, kr *keyring, req *request, now time.Time) {
	var keys [][]byte
	var rules []*rule
	for _, ru := range p.rules {
		if ru.kind == ruleLinks {
			keys = append(keys, ru.links.key)
			rules = append(rules, ru)
		}
	}
	l, i, err := link.Verify(r.URL.Query().Get("t"), keys)
	if err != nil || l.Host != req.host {
		writePage(w, r, pageLinkInvalid)
		return
	}
	if !now.Before(l.Expires) {
		writePage(w, r, pageLinkExpired)
		return
	}
	if l.Uses > 0 {
		if e.cfg.Uses == nil {
			writePage(w, r, pageLinkUsedUp)
			return
		}
		if err := e.cfg.Uses.UseLink(p.ID, rules[i].links.id+"/"+l.ID, l.Uses, l.Expires); err != nil {
			if errors.Is(err, ErrUsedUp) {
				writePage(w, r, pageLinkUsedUp)
				return
			}
			e.log.Warn("counting a link's use failed", "policy", p.ID, "err", err)
			w.Header().Set("Retry-After", "5")
			writePage(w, r, page{Status: http.StatusServiceUnavailable, Title: "Try again",
				Message: "The edge cannot count the uses of this link right now. Try again in a moment."})
			return
		}
	}
	exp := now.Add(p.lifetime)
	if l.Expires.Before(exp) {
		exp = l.Expires
	}
	s := &Session{Method: MethodLink, Provider: rules[i].links.id, ID: newID(12), Subject: "link:" + l.ID, Scope: l.Path,
		Issued: now, Expires: exp}
	if err := e.setSession(w, kr, req, s, nil, now); err != nil {
		writePage(w, r, pageLinkInvalid)
		return
	}
	e.log.Info("link opened", "policy", p.ID, "host", req.host, "link", l.ID)
	http.Redirect(w, r, l.Path, http.StatusSeeOther)
}
