package edgeapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Observer records one API call.
type Observer func(operation, result string, took time.Duration)

// InstrumentedTransport reports each edge API call to observe, as
// "METHOD /v1/collection[/{id}[/action]]" and a result class, so the label
// set stays bounded whatever ids appear in paths.
func InstrumentedTransport(base http.RoundTripper, observe Observer) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		start := time.Now()
		resp, err := base.RoundTrip(req)
		result := "error"
		if err == nil {
			result = resultClass(resp.StatusCode)
		}
		op := req.Method + " " + Route(req.URL.Path)
		if req.URL.Query().Has("wait") {
			// A long poll lasts as long as nothing changes: keep it out
			// of the latency of the calls that answer at once.
			op += " (watch)"
		}
		observe(op, result, time.Since(start))
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Route replaces the id segment of an API path with {id}; a secret's name,
// which may hold slashes, is {id} as a whole. The batch calls of tunnel
// keys keep their names.
func Route(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) >= 3 && parts[1] == "secrets" {
		parts = append(parts[:2], "{id}")
	}
	batch := len(parts) == 3 && parts[1] == "tunnel-keys" && (parts[2] == "batch" || parts[2] == "renew")
	if len(parts) >= 3 && !batch {
		parts[2] = "{id}"
	}
	return "/" + strings.Join(parts, "/")
}

func resultClass(code int) string {
	switch {
	case code == http.StatusTooManyRequests:
		return "429"
	case code >= 500:
		return "5xx"
	case code >= 400:
		return "4xx"
	}
	return strconv.Itoa(code/100) + "xx"
}
