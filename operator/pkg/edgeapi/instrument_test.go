package edgeapi

import "testing"

func TestRoute(t *testing.T) {
	for in, want := range map[string]string{
		"/v1/tunnel-keys":                  "/v1/tunnel-keys",
		"/v1/tunnel-keys/tk_123":           "/v1/tunnel-keys/{id}",
		"/v1/tunnel-keys/tk_123/renew":     "/v1/tunnel-keys/{id}/renew",
		"/v1/tunnel-keys/batch":            "/v1/tunnel-keys/batch",
		"/v1/tunnel-keys/renew":            "/v1/tunnel-keys/renew",
		"/v1/domains/a.example.com/verify": "/v1/domains/{id}/verify",
		"/v1/edge":                         "/v1/edge",
		"/v1/tcp-endpoints/postgres":       "/v1/tcp-endpoints/{id}",
		"/v1/secrets":                      "/v1/secrets",
		"/v1/secrets/db":                   "/v1/secrets/{id}",
		"/v1/secrets/team-a/prod/db":       "/v1/secrets/{id}",
	} {
		if got := Route(in); got != want {
			t.Errorf("Route(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestResultClass(t *testing.T) {
	for code, want := range map[int]string{200: "2xx", 204: "2xx", 404: "4xx", 429: "429", 503: "5xx"} {
		if got := resultClass(code); got != want {
			t.Errorf("resultClass(%d) = %q, want %q", code, got, want)
		}
	}
}
