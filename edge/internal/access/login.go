package access

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"code.tuna.am/tuna/k8s-operator/edge/access/link"
)

// loginState is what the login cookie keeps between the redirect to the
// provider and the callback: sealed for the host, so neither the browser
// nor anyone else can read or change it.
type loginState struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	// Return is the path to go back to (always a path of the host).
	Return string `json:"r"`
	// Rule is the provider id of the oidc rule that asked.
	Rule    string `json:"p"`
	Expires int64  `json:"e"`
}

// loginLifetime bounds a login, from the redirect to the callback.
const loginLifetime = 10 * time.Minute

// maxCookie is the largest cookie value browsers keep (4096 bytes with
// the name and attributes).
const maxCookie = 3900

// safeReturn reports whether target is a path of this host to send a
// browser back to: it starts with one '/', and no browser reads it as
// another host ("//evil", "/\evil", control characters).
func safeReturn(target string) bool {
	if !strings.HasPrefix(target, "/") || strings.HasPrefix(target, "//") || strings.HasPrefix(target, "/\\") {
		return false
	}
	for i := range len(target) {
		if c := target[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return false
		}
	}
	u, err := url.Parse(target)
	return err == nil && u.Scheme == "" && u.Host == "" && u.User == nil
}

// startLogin sends a browser to rule's provider, with a new state, nonce
// and PKCE verifier in a login cookie. A request that a browser did not
// navigate to (not GET or HEAD) gets 401 instead: a redirect to a login
// page would be read as its answer.
func (e *Engine) startLogin(w http.ResponseWriter, r *http.Request, p *Policy, kr *keyring, req *request, ru *rule, ret string, now time.Time) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte("tuna-edge: this address needs a login: open " + req.origin() + LoginPath + " in a browser\n"))
		return
	}
	if !safeReturn(ret) {
		ret = "/"
	}
	prov, err := e.providers.get(ru.oidc.issuer, now)
	if err != nil {
		e.log.Warn("login refused: the identity provider cannot be reached", "policy", p.ID, "issuer", ru.oidc.issuer, "err", err)
		w.Header().Set("Retry-After", "30")
		writePage(w, r, pageProviderDown)
		return
	}
	st := loginState{State: newID(24), Nonce: newID(24), Verifier: oauth2.GenerateVerifier(), Return: ret, Rule: ru.oidc.id,
		Expires: now.Add(loginLifetime).Unix()}
	plain, _ := json.Marshal(st)
	value, err := kr.seal(loginAAD, req.host, plain)
	if err != nil || len(value) > maxCookie {
		writePage(w, r, pageLoginStale)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookieName(req.secure, st.State), Value: value, Path: "/", MaxAge: int(loginLifetime / time.Second),
		HttpOnly: true, Secure: req.secure, SameSite: http.SameSiteLaxMode})
	to := ru.oidc.config(prov, req.origin()).AuthCodeURL(st.State, oidc.Nonce(st.Nonce), oauth2.S256ChallengeOption(st.Verifier))
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, to, http.StatusFound)
}

// serveEdge answers the paths the edge serves on every protected host.
func (e *Engine) serveEdge(w http.ResponseWriter, r *http.Request, p *Policy, kr *keyring, req *request) {
	now := e.cfg.Now()
	switch req.path {
	case JWKSPath:
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		_, _ = w.Write(kr.jwks)
	case LoginPath:
		ret := r.URL.Query().Get("rd")
		if ret == "" {
			ret = "/"
		}
		if !safeReturn(ret) {
			writePage(w, r, pageBadReturn)
			return
		}
		for _, ru := range p.rules {
			if ru.kind == ruleOIDC {
				e.startLogin(w, r, p, kr, req, ru, ret, now)
				return
			}
		}
		writePage(w, r, pageNoLogin)
	case CallbackPath:
		e.callback(w, r, p, kr, req, now)
	case LogoutPath:
		ret := r.URL.Query().Get("rd")
		if ret != "" && !safeReturn(ret) {
			writePage(w, r, pageBadReturn)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: sessionCookieName(req.secure), Value: "", Path: "/", MaxAge: -1,
			HttpOnly: true, Secure: req.secure, SameSite: http.SameSiteLaxMode})
		if ret != "" {
			http.Redirect(w, r, ret, http.StatusSeeOther)
			return
		}
		writePage(w, r, pageSignedOut)
	case link.Path:
		e.redeemLink(w, r, p, kr, req, now)
	default:
		writePage(w, r, pageNotFound)
	}
}

// callback completes a login: the state must match a login cookie of this
// host, the code is exchanged with the PKCE verifier, and the ID token's
// signature, issuer, audience, expiry and nonce are checked.
func (e *Engine) callback(w http.ResponseWriter, r *http.Request, p *Policy, kr *keyring, req *request, now time.Time) {
	q := r.URL.Query()
	state := q.Get("state")
	var st loginState
	if state == "" {
		writePage(w, r, pageLoginStale)
		return
	}
	name := loginCookieName(req.secure, state)
	value, ok := cookieValue(req.cookie, name)
	if !ok {
		writePage(w, r, pageLoginStale)
		return
	}
	// The login cookie is spent whatever happens next: a callback cannot
	// be replayed with it.
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: req.secure, SameSite: http.SameSiteLaxMode})
	plain, err := kr.open(loginAAD, req.host, value)
	if err != nil || json.Unmarshal(plain, &st) != nil || now.Unix() >= st.Expires ||
		subtle.ConstantTimeCompare([]byte(st.State), []byte(state)) != 1 {
		writePage(w, r, pageLoginStale)
		return
	}
	var ru *rule
	for _, x := range p.rules {
		if x.kind == ruleOIDC && x.oidc.id == st.Rule {
			ru = x
		}
	}
	if ru == nil {
		writePage(w, r, pageLoginStale)
		return
	}
	if msg := q.Get("error"); msg != "" {
		pg := pageProviderRefused
		pg.Message += " It answered: " + msg
		if d := q.Get("error_description"); d != "" {
			pg.Message += " (" + d + ")"
		}
		writePage(w, r, pg)
		return
	}
	prov, err := e.providers.get(ru.oidc.issuer, now)
	if err != nil {
		w.Header().Set("Retry-After", "30")
		writePage(w, r, pageProviderDown)
		return
	}
	ctx, cancel := context.WithTimeout(oidc.ClientContext(r.Context(), e.cfg.IdPClient), 15*time.Second)
	defer cancel()
	tok, err := ru.oidc.config(prov, req.origin()).Exchange(ctx, q.Get("code"), oauth2.VerifierOption(st.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			e.log.Info("login refused: the provider did not take the code", "policy", p.ID, "err", err)
			writePage(w, r, pageProviderRefused)
			return
		}
		e.log.Warn("login failed: the identity provider cannot be reached", "policy", p.ID, "err", err)
		w.Header().Set("Retry-After", "30")
		writePage(w, r, pageProviderDown)
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := prov.Verifier(&oidc.Config{ClientID: ru.oidc.clientID, Now: e.cfg.Now}).Verify(ctx, raw)
	if err != nil || subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(st.Nonce)) != 1 {
		e.log.Info("login refused: the ID token does not check out", "policy", p.ID, "err", err)
		writePage(w, r, pageProviderRefused)
		return
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		writePage(w, r, pageProviderRefused)
		return
	}
	if _, has := claims["email"]; !has {
		// Some providers put the profile in userinfo only, not in the ID
		// token: ask it once, at login, for the same subject.
		if ui, err := prov.UserInfo(ctx, oauth2.StaticTokenSource(tok)); err == nil && ui.Subject == idt.Subject {
			var more map[string]any
			if ui.Claims(&more) == nil {
				for k, v := range more {
					if _, has := claims[k]; !has {
						claims[k] = v
					}
				}
			}
		}
	}
	s := ru.oidc.sessionFrom(claims)
	s.ID, s.Issued, s.Expires = newID(12), now, now.Add(p.lifetime)
	if !ru.oidc.claimsAllow(claims) || !ru.oidc.allows(s) {
		e.log.Info("login of a user the policy does not admit", "policy", p.ID, "user", s.User())
		pg := pageDenied
		pg.Message = "You signed in as " + s.User() + ", who may not open this address. Ask its owner, or sign in with another account."
		writeCustom(w, r, p.denyPage, pg)
		return
	}
	if err := e.setSession(w, kr, req, s, ru, now); err != nil {
		writePage(w, r, pageLoginStale)
		return
	}
	e.log.Info("login", "policy", p.ID, "host", req.host, "user", s.User(), "session", s.ID)
	http.Redirect(w, r, st.Return, http.StatusSeeOther)
}

// setSession writes the session cookie for req's host. Groups that make
// the cookie too large are dropped, but for those the rule names.
func (e *Engine) setSession(w http.ResponseWriter, kr *keyring, req *request, s *Session, ru *rule, now time.Time) error {
	value, err := kr.sealSession(req.host, s)
	if err == nil && len(value) > maxCookie && ru != nil && ru.oidc != nil {
		var kept []string
		for _, g := range s.Groups {
			for _, a := range ru.oidc.groups {
				if g == a {
					kept = append(kept, g)
				}
			}
		}
		s.Groups = kept
		value, err = kr.sealSession(req.host, s)
	}
	if err != nil {
		return err
	}
	if len(value) > maxCookie {
		return errors.New("the session does not fit in a cookie")
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookieName(req.secure), Value: value, Path: "/",
		MaxAge: int(s.Expires.Sub(now) / time.Second), HttpOnly: true, Secure: req.secure, SameSite: http.SameSiteLaxMode})
	return nil
}
