package access

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// A policy's own deny and maintenance pages are answered instead of the
// edge's, with the status and fields of the page they replace: 403 for a
// refusal, 503 with Retry-After for maintenance.
func TestCustomPages(t *testing.T) {
	now := time.Now()
	e := oidcEngine(t, now)
	const denyHTML, maintHTML = "<h1>Not for you</h1>", "<h1>Back soon</h1>"
	for _, tc := range []struct {
		name        string
		policy      apiwire.AccessPolicy
		status      int
		body, retry string
	}{
		{"deny", apiwire.AccessPolicy{Owner: "o", Name: "deny", Rules: []apiwire.AccessRule{{Deny: true}}, DenyPage: denyHTML},
			http.StatusForbidden, denyHTML, ""},
		{"maintenance", apiwire.AccessPolicy{Owner: "o", Name: "maint", Rules: []apiwire.AccessRule{{Public: true}}, Maintenance: true,
			MaintenancePage: maintHTML}, http.StatusServiceUnavailable, maintHTML, "300"},
		{"deny without a page of its own", apiwire.AccessPolicy{Owner: "o", Name: "plain", Rules: []apiwire.AccessRule{{Deny: true}}},
			http.StatusForbidden, "Access denied", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(tc.policy, e)
			if err != nil {
				t.Fatal(err)
			}
			e.Put(p)
			w := httptest.NewRecorder()
			if _, pass := e.Serve(w, httptest.NewRequest("GET", "http://h/x", nil), "o/"+tc.policy.Name, "192.0.2.1:1", false, nil); pass {
				t.Fatal("the request went through")
			}
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.body) || w.Header().Get("Retry-After") != tc.retry ||
				!strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") || w.Header().Get("Cache-Control") != "no-store" {
				t.Fatalf("got %d, Retry-After %q, Content-Type %q, Cache-Control %q:\n%s", w.Code, w.Header().Get("Retry-After"),
					w.Header().Get("Content-Type"), w.Header().Get("Cache-Control"), w.Body.String())
			}
		})
	}
}
