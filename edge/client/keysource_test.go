package client

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// roundTripFunc answers requests in process: the test needs only what the
// client sends, not a listener.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestKeySourceIsAskedOnEveryCall(t *testing.T) {
	var sent []string
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent = append(sent, r.Header.Get("Authorization"))
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{},
			Body: io.NopCloser(strings.NewReader(`{"id":"x","scopes":[]}`)), Request: r}, nil
	})
	var current atomic.Pointer[string]
	a, b := "tuna_aaaaaaaaaaaaaaaa_one", "tuna_bbbbbbbbbbbbbbbb_two"
	current.Store(&a)
	c := New("https://edge.example", "tuna_cccccccccccccccc_ignored",
		WithHTTPClient(&http.Client{Transport: rt}), WithKeySource(func() string { return *current.Load() }))

	ctx := context.Background()
	if _, err := c.WhoAmI(ctx); err != nil {
		t.Fatal(err)
	}
	current.Store(&b)
	if _, err := c.WhoAmI(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"Bearer " + a, "Bearer " + b}
	if len(sent) != 2 || sent[0] != want[0] || sent[1] != want[1] {
		t.Fatalf("sent %q, want %q", sent, want)
	}
}

func TestWithoutKeySourceTheKeyOfNewIsSent(t *testing.T) {
	var sent string
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent = r.Header.Get("Authorization")
		return &http.Response{StatusCode: http.StatusNoContent, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})
	c := New("https://edge.example", "tuna_cccccccccccccccc_fixed", WithHTTPClient(&http.Client{Transport: rt}))
	if err := c.DeleteAPIKey(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	if sent != "Bearer tuna_cccccccccccccccc_fixed" {
		t.Fatalf("sent %q", sent)
	}
}
