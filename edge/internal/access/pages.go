package access

import (
	"html/template"
	"net/http"
	"strings"
)

// page is one of the edge's own answers to a person in a browser. Each
// says what happened and what to do; none reveals more of the policy than
// the person needs.
type page struct {
	Status  int
	Title   string
	Message string
	// Action, if set, is a link to go on (a path on the same host).
	Action, ActionText string
}

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{{.Title}}</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;background:#f4f6f8;color:#1d2733;margin:0;display:flex;min-height:100vh;align-items:center;justify-content:center}
main{background:#fff;border-radius:12px;box-shadow:0 2px 12px rgba(0,0,0,.08);padding:2.5rem 3rem;max-width:34rem}
h1{font-size:1.4rem;margin:0 0 1rem}p{line-height:1.5;margin:0 0 1.5rem}
a.button{display:inline-block;background:#1d5fd1;color:#fff;text-decoration:none;padding:.6rem 1.2rem;border-radius:6px}
footer{margin-top:2rem;font-size:.8rem;color:#6b7785}
</style></head>
<body><main><h1 id="title">{{.Title}}</h1><p id="message">{{.Message}}</p>
{{if .Action}}<a class="button" id="action" href="{{.Action}}">{{.ActionText}}</a>{{end}}
<footer>{{.Status}} · tuna-edge</footer></main></body></html>
`))

// pageCSP keeps the edge's own pages inert: no script, no frame, nothing
// loaded from elsewhere.
const pageCSP = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; form-action 'none'"

func writePage(w http.ResponseWriter, r *http.Request, p page) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(p.Status)
	if r.Method == http.MethodHead {
		return
	}
	_ = pageTemplate.Execute(w, p)
}

// writeCustom answers with a policy's own page (HTML as the policy has it)
// or, without one, the edge's.
func writeCustom(w http.ResponseWriter, r *http.Request, html string, fallback page) {
	if html == "" {
		writePage(w, r, fallback)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(fallback.Status)
	if r.Method != http.MethodHead {
		_, _ = strings.NewReader(html).WriteTo(w)
	}
}

// The edge's pages.
var (
	pageDenied = page{Status: http.StatusForbidden, Title: "Access denied",
		Message: "You are not allowed to open this address. If you think you should be, ask its owner."}
	pageMaintenance = page{Status: http.StatusServiceUnavailable, Title: "Down for maintenance",
		Message: "This site is down for maintenance. Please come back later."}
	pageTooMany = page{Status: http.StatusTooManyRequests, Title: "Too many requests",
		Message: "You sent too many requests in a short time. Wait a moment, then try again."}
	pagePolicyMissing = page{Status: http.StatusServiceUnavailable, Title: "Access check not ready",
		Message: "This address is protected, but its access policy is not in force at the edge yet, so no request is let through. Try again in a moment."}
	pageNeedLink = page{Status: http.StatusForbidden, Title: "A shared link is needed",
		Message: "This address opens only with a link its owner shared. Open the link you were given."}
	pageLinkInvalid = page{Status: http.StatusForbidden, Title: "This link is not valid",
		Message: "The link was changed, or it was not made for this address. Ask for a new one."}
	pageLinkExpired = page{Status: http.StatusForbidden, Title: "This link has expired",
		Message: "The link you followed is past its expiry. Ask for a new one."}
	pageLinkUsedUp = page{Status: http.StatusForbidden, Title: "This link was used up",
		Message: "The link you followed was opened as many times as it allows. Ask for a new one."}
	pageLoginStale = page{Status: http.StatusBadRequest, Title: "Sign-in could not be completed",
		Message: "This sign-in was not started here, or it took too long. Start again.", Action: "/", ActionText: "Start again"}
	pageProviderDown = page{Status: http.StatusServiceUnavailable, Title: "Sign-in is unavailable",
		Message: "The identity provider of this site cannot be reached, so nobody can sign in right now. If you are signed in already, nothing changes for you. Try again in a few minutes."}
	pageProviderRefused = page{Status: http.StatusForbidden, Title: "Sign-in was refused",
		Message: "The identity provider did not complete the sign-in.", Action: "/", ActionText: "Try again"}
	pageSignedOut = page{Status: http.StatusOK, Title: "Signed out",
		Message: "You are signed out of this site.", Action: "/", ActionText: "Sign in again"}
	pageBadReturn = page{Status: http.StatusBadRequest, Title: "Not a page of this site",
		Message: "The address to return to after signing in must be a page of this site."}
	pageNotFound = page{Status: http.StatusNotFound, Title: "Not found",
		Message: "There is nothing here."}
	pageNoLogin = page{Status: http.StatusNotFound, Title: "No sign-in here",
		Message: "This site has no sign-in with an identity provider."}
)
