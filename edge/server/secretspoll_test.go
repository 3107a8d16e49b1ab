package server_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/edge/server"
)

// Over HTTP/1.1 too (curl, other clients), a long poll outlives the API's
// read and write timeouts.
func TestSecretsLongPollHTTP1(t *testing.T) {
	e := startEdge(t, t.TempDir(), noRateLimit, func(c *server.Config) {
		c.APITimeouts.Read, c.APITimeouts.Write = time.Second, time.Second
	})
	ctx := context.Background()
	if _, err := e.client(e.fullKey).PutSecret(ctx, "a", apiwire.PutSecret{Data: data("k", "v")}); err != nil {
		t.Fatal(err)
	}
	list, err := e.client(e.fullKey).ListSecrets(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := client.Trust{Fingerprint: e.APIFingerprint()}.Transport()
	if err != nil {
		t.Fatal(err)
	}
	tr.ForceAttemptHTTP2 = false
	tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} // HTTP/1.1 only
	t.Cleanup(tr.CloseIdleConnections)
	req, _ := http.NewRequest(http.MethodGet, e.APIURL()+"/v1/secrets?wait=3s", nil)
	req.Header.Set("Authorization", "Bearer "+e.fullKey)
	req.Header.Set("If-None-Match", list.ETag)
	start := time.Now()
	resp, err := (&http.Client{Transport: tr, Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("long poll over HTTP/1.1: %v after %s", err, time.Since(start))
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified || resp.ProtoMajor != 1 || time.Since(start) < 3*time.Second {
		t.Fatalf("long poll over HTTP/1.1: %d %s after %s", resp.StatusCode, resp.Proto, time.Since(start))
	}
	if resp.Header.Get("ETag") != list.ETag {
		t.Fatalf("304 with ETag %q, want %q", resp.Header.Get("ETag"), list.ETag)
	}
}
