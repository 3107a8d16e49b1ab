package certs

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHTTPChallengeAnswers: the HTTP-01 answer is served, from the store,
// for a served host and a well-formed token only; everything else goes on
// to the edge's own handler.
func TestHTTPChallengeAnswers(t *testing.T) {
	st, _ := openStore(t)
	m, err := New(Config{Store: st, Seal: testSealer(t), ACME: &ACME{},
		HostPolicy: func(_ context.Context, host string) error {
			if host != "served.example" {
				return errors.New("not served")
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	token := strings.Repeat("aB3-_", 9)
	if err := st.PutACMEValue("http-01/"+token, []byte(token+".thumb"), false); err != nil {
		t.Fatal(err)
	}
	h := m.HTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	get := func(host, path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://"+host+path, nil))
		return rec.Code, rec.Body.String()
	}
	for _, c := range []struct {
		host, path string
		code       int
		body       string
	}{
		{"served.example", "/.well-known/acme-challenge/" + token, 200, token + ".thumb"},
		{"served.example:80", "/.well-known/acme-challenge/" + token, 200, token + ".thumb"},
		{"other.example", "/.well-known/acme-challenge/" + token, 404, ""},
		{"served.example", "/.well-known/acme-challenge/short", 404, ""},
		{"served.example", "/.well-known/acme-challenge/" + strings.Repeat("x", 30) + "!", 404, ""},
		{"served.example", "/.well-known/acme-challenge/" + strings.Repeat("z", 43), 404, ""},
		{"served.example", "/app", http.StatusTeapot, ""},
	} {
		code, body := get(c.host, c.path)
		if code != c.code || (c.body != "" && body != c.body) {
			t.Errorf("%s%s: %d %q, want %d %q", c.host, c.path, code, body, c.code, c.body)
		}
	}
}
