package access

import (
	"net/http"
	"strings"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/internal/names"
	"code.tuna.am/tuna/k8s-operator/internal/httprule"
)

// Serve decides a request that net/http read, for an address guarded by
// the policy id. It returns true when the request goes on to the tunnel,
// its header edited (the client's own cookies of the edge and basic
// credentials removed, the identity fields set, the policy's edits) and w
// wrapped to edit the answer; false when it answered the request itself:
// the /.tuna/ paths, a login, a refusal, a limit, a missing policy.
//
// The caller has dropped the client's identity fields already
// (httprule.EdgeWritten), as for every host. local, if set, runs before
// the engine answers itself (the bounds of the edge's own answers).
func (e *Engine) Serve(w http.ResponseWriter, r *http.Request, id, remote string, secure bool, local func()) (http.ResponseWriter, bool) {
	var p *Policy
	var kr *keyring
	if e != nil {
		p, kr = e.Lookup(id), e.keys.Load()
	}
	answer := func() {
		if local != nil {
			local()
		}
	}
	if p == nil || kr == nil {
		answer()
		w.Header().Set("Retry-After", "5")
		writePage(w, r, pagePolicyMissing)
		return w, false
	}
	req := fromHTTP(r, remote, secure)
	if strings.HasPrefix(req.path, Prefix) {
		answer()
		e.serveEdge(w, r, p, kr, req)
		return w, false
	}
	if !normalPath(req.path) {
		answer()
		writePage(w, r, pageAmbiguous)
		return w, false
	}
	now := e.cfg.Now()
	d := p.decide(e, req, kr, now, false)
	if d.verdict != pass {
		answer()
		e.refuse(w, r, p, kr, req, d, now)
		return w, false
	}
	h := r.Header
	if d.cookieSeen || strings.Contains(req.cookie, "tuna-") {
		if kept, found := stripOwnCookies(req.cookie); found {
			if kept == "" {
				h.Del("Cookie")
			} else {
				h["Cookie"] = []string{kept}
			}
		}
	}
	if d.user != "" {
		h.Del("Authorization")
	}
	if p.identity {
		if id := d.identity(); id != nil {
			if f := e.identity(p, kr, req, id, now); f != nil {
				for _, kv := range f.pairs {
					h.Set(kv[0], kv[1])
				}
			}
		}
	}
	for _, name := range p.reqRemove {
		h.Del(name)
	}
	for _, f := range p.reqSet {
		h.Set(f[0], f[1])
	}
	if len(p.respSet)+len(p.respRemove) > 0 {
		w = &editingWriter{ResponseWriter: w, p: p}
	}
	return w, true
}

// identity returns the fields the upstream gets for id, the assertion
// last, or nil when the assertion could not be signed.
func (e *Engine) identity(p *Policy, kr *keyring, req *request, id *Session, now time.Time) *identityFields {
	k := identityKey{secure: req.secure, authority: req.authority, policy: p.ID, method: id.Method, id: id.ID}
	f, err := e.assertions.identity(kr, k, now, func() ([][2]string, Claims) {
		out := make([][2]string, 0, 4)
		out = append(out, [2]string{httprule.IdentityUser, id.User()})
		if id.Email != "" {
			out = append(out, [2]string{httprule.IdentityEmail, id.Email})
		}
		if len(id.Groups) > 0 {
			out = append(out, [2]string{httprule.IdentityGroups, strings.Join(id.Groups, ",")})
		}
		c := Claims{Issuer: req.origin() + AssertionIssuerPath, Audience: req.host, Subject: id.Subject, Email: id.Email, Name: id.Name,
			Groups: id.Groups, Method: id.Method.String(), Policy: p.Name, Session: id.ID}
		if !id.Expires.IsZero() {
			c.Expires = id.Expires.Unix()
		}
		return out, c
	})
	if err != nil {
		e.log.Error("signing an identity assertion failed: the request goes on without the identity fields", "err", err)
		return nil
	}
	return f
}

func fromHTTP(r *http.Request, remote string, secure bool) *request {
	req := &request{method: r.Method, target: r.URL.RequestURI(), path: r.URL.EscapedPath(), host: names.Normalize(r.Host),
		authority: r.Host, secure: secure, remote: hostOnly(remote),
		cookie: strings.Join(r.Header.Values("Cookie"), "; "), authorization: r.Header.Get("Authorization")}
	if req.path == "" {
		req.path = "/"
	}
	return req
}

func hostOnly(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 && !strings.Contains(addr[i:], "]") {
		addr = addr[:i]
	}
	return strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]")
}

// normalPath refuses a path that a backend may read as another one than
// the rules matched: dot segments, empty segments, backslashes, and an
// encoded '/', '\' or '.'. Browsers never send these.
func normalPath(p string) bool {
	if strings.Contains(p, "//") || strings.Contains(p, "\\") || strings.Contains(p, "/./") || strings.Contains(p, "/../") ||
		strings.HasSuffix(p, "/.") || strings.HasSuffix(p, "/..") {
		return false
	}
	if strings.IndexByte(p, '%') < 0 {
		return true
	}
	l := strings.ToLower(p)
	return !strings.Contains(l, "%2f") && !strings.Contains(l, "%5c") && !strings.Contains(l, "%2e")
}

var pageAmbiguous = page{Status: http.StatusBadRequest, Title: "Malformed address",
	Message: "The path of this request has dot segments, empty segments or encoded slashes, which a protected site does not take."}

// refuse answers a request the policy did not let through.
func (e *Engine) refuse(w http.ResponseWriter, r *http.Request, p *Policy, kr *keyring, req *request, d decision, now time.Time) {
	switch d.verdict {
	case maintenance:
		w.Header().Set("Retry-After", "300")
		writeCustom(w, r, p.maintPage, pageMaintenance)
	case limited:
		w.Header().Set("Retry-After", retryAfter(d.wait))
		writePage(w, r, pageTooMany)
	case challenge, wrongPassword:
		w.Header().Set("WWW-Authenticate", `Basic realm="`+d.rule.basic.realm+`", charset="UTF-8"`)
		pg := page{Status: http.StatusUnauthorized, Title: "Sign-in required", Message: "This site needs a user name and a password."}
		if d.verdict == wrongPassword {
			pg.Message = "The user name or the password is wrong."
		}
		writePage(w, r, pg)
	case login:
		e.startLogin(w, r, p, kr, req, d.rule, req.target, now)
	case notAllowed:
		pg := pageDenied
		pg.Message = "You are signed in as " + d.session.User() + ", who may not open this address. Sign out to use another account, or ask its owner."
		pg.Action, pg.ActionText = LogoutPath, "Sign out"
		writeCustom(w, r, p.denyPage, pg)
	case needLink:
		writeCustom(w, r, p.denyPage, pageNeedLink)
	default:
		writeCustom(w, r, p.denyPage, pageDenied)
	}
}

// editingWriter applies a policy's edits of the answer when the upstream's
// head is written.
type editingWriter struct {
	http.ResponseWriter
	p    *Policy
	done bool
}

func (w *editingWriter) edit() {
	if w.done {
		return
	}
	w.done = true
	h := w.Header()
	for _, name := range w.p.respRemove {
		h.Del(name)
	}
	for _, f := range w.p.respSet {
		h.Set(f[0], f[1])
	}
}

func (w *editingWriter) WriteHeader(code int) {
	if code >= 200 {
		w.edit()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *editingWriter) Write(b []byte) (int, error) {
	w.edit()
	return w.ResponseWriter.Write(b)
}

func (w *editingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *editingWriter) Flush() {
	w.edit()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
