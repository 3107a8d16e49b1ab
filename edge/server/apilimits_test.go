package server_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/edge/internal/api"
	"code.tuna.am/tuna/k8s-operator/edge/server"
)

// dialAPI opens a TLS connection to the API that pins its certificate.
func (e *testEdge) dialAPI(t *testing.T) *tls.Conn {
	t.Helper()
	cfg, err := client.Trust{Fingerprint: e.APIFingerprint()}.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", strings.TrimPrefix(e.APIURL(), "https://"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// A client that sends its headers one byte at a time is cut off once the
// read-header timeout passes; the same request sent at once is served.
func TestAPISlowHeadersAreCutOff(t *testing.T) {
	// The timeout covers the TLS handshake too: 2 s, so that the prompt
	// client is served on a machine under load and -race (300 ms was cut
	// off there once, before its first write); the slow client's request
	// takes about 9 s at its pace, far beyond it.
	e := startEdge(t, t.TempDir(), func(c *server.Config) { c.APITimeouts.ReadHeader = 2 * time.Second })
	req := "GET /healthz HTTP/1.1\r\nHost: edge\r\nX-Pad: " + strings.Repeat("a", 400) + "\r\n\r\n"

	fast := e.dialAPI(t)
	if _, err := io.WriteString(fast, req); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := fast.Read(buf)
	if !strings.HasPrefix(string(buf[:n]), "HTTP/1.1 200") {
		t.Fatalf("the request sent at once got %q", buf[:n])
	}

	slow := e.dialAPI(t)
	closed := make(chan []byte, 1)
	go func() {
		got, _ := io.ReadAll(slow) // returns when the server hangs up
		closed <- got
	}()
	sent := 0
	var answer []byte
loop:
	for sent < len(req) {
		select {
		case answer = <-closed:
			break loop
		case <-time.After(20 * time.Millisecond): // the slow client's pace, not a wait for a condition
		}
		if _, err := io.WriteString(slow, req[sent:sent+1]); err != nil {
			break
		}
		sent++
	}
	if answer == nil {
		select {
		case answer = <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("the server kept the slow connection open")
		}
	}
	if sent == len(req) {
		t.Fatalf("the slow client sent all %d bytes: it was never cut off", sent)
	}
	if strings.Contains(string(answer), "200 OK") {
		t.Fatalf("the slow request was served: %q", answer)
	}
}

// A body over the limit is refused with 413 in the API's error shape.
func TestAPIOversizedBody(t *testing.T) {
	e := startEdge(t, t.TempDir())
	body := `{"protocol":"http","address":"` + strings.Repeat("a", api.MaxBody) + `"}`
	req, err := http.NewRequest(http.MethodPost, e.APIURL()+"/v1/tunnel-keys", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.writeKey)
	resp, err := e.apiHTTP(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("status %d, body not JSON: %v", resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusRequestEntityTooLarge || out["code"] != apiwire.CodeTooLarge ||
		!strings.Contains(out["error"], "bytes") || !strings.HasPrefix(out["request_id"], "req_") {
		t.Fatalf("oversized body: %d %v", resp.StatusCode, out)
	}
	keys, err := e.client(e.writeKey).ListTunnelKeys(context.Background(), nil)
	if err != nil || len(keys) != 0 {
		t.Fatalf("a key was issued from the oversized request: %v %v", keys, err)
	}
}

// A key over its rate gets 429 rate_limited with Retry-After, which the Go
// client reads; other keys are not affected.
func TestAPIRateLimitPerKey(t *testing.T) {
	e := startEdge(t, t.TempDir(), func(c *server.Config) { c.APIRateLimit, c.APIRateBurst = 0.5, 5 })
	ctx := context.Background()
	c := e.client(e.writeKey)
	var limited *apiwire.APIError
	for i := range 20 {
		_, err := c.WhoAmI(ctx)
		if err == nil {
			continue
		}
		if !errors.As(err, &limited) {
			t.Fatalf("call %d: %v", i, err)
		}
		if i < 5 {
			t.Fatalf("refused within the burst of 5, at call %d: %v", i, err)
		}
		break
	}
	if limited == nil {
		t.Fatal("20 calls at once were never limited (rate 0.5/s, burst 5)")
	}
	if limited.Status != http.StatusTooManyRequests || limited.Code != apiwire.CodeRateLimited ||
		limited.RetryAfter < time.Second || !limited.Retryable() || limited.RequestID == "" {
		t.Fatalf("limited answer: %+v", limited)
	}
	if !strings.Contains(limited.Message, "Retry-After") {
		t.Errorf("message %q does not tell what to do", limited.Message)
	}
	if _, err := e.client(e.fullKey).WhoAmI(ctx); err != nil {
		t.Fatalf("another key was limited too: %v", err)
	}

	// The raw answer: Retry-After in whole seconds, the API's error shape.
	req, _ := http.NewRequest(http.MethodGet, e.APIURL()+"/v1/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+e.writeKey)
	resp, err := e.apiHTTP(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&out)
	// At 0.5/s the next token is at most 2 s away; whole seconds, rounded up.
	ra := resp.Header.Get("Retry-After")
	if resp.StatusCode != http.StatusTooManyRequests || (ra != "1" && ra != "2") ||
		out["code"] != apiwire.CodeRateLimited || out["request_id"] == "" {
		t.Fatalf("raw 429: %d Retry-After %q %v", resp.StatusCode, ra, out)
	}
	// The budget is told on every authenticated answer, the refusal too,
	// so a client paces itself without a 429 to learn it from.
	if l, b := resp.Header.Get(apiwire.HeaderRateLimit), resp.Header.Get(apiwire.HeaderRateBurst); l != "0.5" || b != "5" {
		t.Errorf("advertised budget on a 429: %s=%q %s=%q, want 0.5 and 5", apiwire.HeaderRateLimit, l, apiwire.HeaderRateBurst, b)
	}
	info, err := e.client(e.fullKey).Edge(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.APIRateLimit == nil || info.APIRateLimit.PerSecond != 0.5 || info.APIRateLimit.Burst != 5 {
		t.Errorf("GET /v1/edge api_rate_limit = %+v, want 0.5/s with bursts of 5", info.APIRateLimit)
	}
}
