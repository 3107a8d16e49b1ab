package server_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/edge/internal/secrets"
	"code.tuna.am/tuna/k8s-operator/edge/server"
)

// noRateLimit keeps the API's per-key rate limit out of these tests.
func noRateLimit(c *server.Config) { c.APIRateLimit, c.APIRateBurst = 1000, 1000 }

func (e *testEdge) apiKey(t *testing.T, prefix string, scopes ...string) *client.Client {
	t.Helper()
	k, err := e.client(e.fullKey).CreateAPIKey(context.Background(), apiwire.CreateAPIKey{Name: "k", Scopes: scopes, SecretPrefix: prefix})
	if err != nil {
		t.Fatalf("creating API key %v %q: %v", scopes, prefix, err)
	}
	if k.SecretPrefix != prefix {
		t.Fatalf("created key has prefix %q, want %q", k.SecretPrefix, prefix)
	}
	return e.client(k.Key)
}

func data(kv ...string) map[string][]byte {
	out := map[string][]byte{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = []byte(kv[i+1])
	}
	return out
}

// wantAPIError checks err is the API's answer status/code and returns its
// message.
func wantAPIError(t *testing.T, what string, err error, status int, code string) (message string) {
	t.Helper()
	var ae *apiwire.APIError
	if !errors.As(err, &ae) || ae.Status != status || ae.Code != code {
		t.Fatalf("%s: %v, want %d %s", what, err, status, code)
	}
	return ae.Message
}

func TestSecretsCRUD(t *testing.T) {
	e := startEdge(t, t.TempDir(), noRateLimit)
	ctx := context.Background()
	full := e.client(e.fullKey)

	zero := int64(0)
	info, err := full.PutSecret(ctx, "team-a/db", apiwire.PutSecret{Data: data("password", "s3cret", "user", "app"), ExpectedVersion: &zero})
	if err != nil || info.Version != 1 || strings.Join(info.Keys, ",") != "password,user" || info.CreatedAt.IsZero() {
		t.Fatalf("create: %+v %v", info, err)
	}
	got, err := full.GetSecret(ctx, "team-a/db")
	if err != nil || string(got.Data["password"]) != "s3cret" || got.Version != 1 || got.Name != "team-a/db" {
		t.Fatalf("get: %+v %v", got, err)
	}
	same, err := full.PutSecret(ctx, "team-a/db", apiwire.PutSecret{Data: data("password", "s3cret", "user", "app")})
	if err != nil || same.Version != 1 || !same.UpdatedAt.Equal(info.UpdatedAt) {
		t.Fatalf("identical put changed the secret: %+v %v", same, err)
	}
	_, err = full.PutSecret(ctx, "team-a/db", apiwire.PutSecret{Data: data("password", "new"), ExpectedVersion: &zero})
	if msg := wantAPIError(t, "expected_version 0 on an existing secret", err, 409, apiwire.CodeVersionConflict); !strings.Contains(msg, "version 1") {
		t.Fatalf("conflict message: %s", msg)
	}
	one := int64(1)
	if v2, err := full.PutSecret(ctx, "team-a/db", apiwire.PutSecret{Data: data("password", "new"), ExpectedVersion: &one}); err != nil || v2.Version != 2 {
		t.Fatalf("conditional update: %+v %v", v2, err)
	}
	if _, err := full.PutSecret(ctx, "team-b/api", apiwire.PutSecret{Data: data("token", "t")}); err != nil {
		t.Fatal(err)
	}
	list, err := full.ListSecrets(ctx, "")
	if err != nil || len(list.Items) != 2 || list.Items[0].Name != "team-a/db" || list.Items[1].Name != "team-b/api" || list.ETag == "" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if l, err := full.ListSecrets(ctx, "team-b/"); err != nil || len(l.Items) != 1 || l.ETag == list.ETag {
		t.Fatalf("list with prefix: %+v %v", l, err)
	}
	if err := full.DeleteSecret(ctx, "team-b/api"); err != nil {
		t.Fatal(err)
	}
	wantAPIError(t, "delete twice", full.DeleteSecret(ctx, "team-b/api"), 404, apiwire.CodeNotFound)
	_, err = full.GetSecret(ctx, "team-b/api")
	wantAPIError(t, "get deleted", err, 404, apiwire.CodeNotFound)

	// Validation.
	for _, c := range []struct {
		what, name string
		in         apiwire.PutSecret
		status     int
		code       string
	}{
		{"upper-case name", "Team/db", apiwire.PutSecret{Data: data("k", "v")}, 400, apiwire.CodeInvalidRequest},
		{"name ending in '-'", "db-", apiwire.PutSecret{Data: data("k", "v")}, 400, apiwire.CodeInvalidRequest},
		{"long name", strings.Repeat("a", 254), apiwire.PutSecret{Data: data("k", "v")}, 400, apiwire.CodeInvalidRequest},
		{"no data", "db", apiwire.PutSecret{}, 400, apiwire.CodeInvalidRequest},
		{"bad key", "db", apiwire.PutSecret{Data: data("a/b", "v")}, 400, apiwire.CodeInvalidRequest},
		{"negative expected_version", "db", apiwire.PutSecret{Data: data("k", "v"), ExpectedVersion: new(int64(-1))}, 400, apiwire.CodeInvalidRequest},
		{"oversize", "db", apiwire.PutSecret{Data: map[string][]byte{"a": make([]byte, 200<<10), "b": make([]byte, 100<<10)}}, 413, apiwire.CodeTooLarge},
	} {
		_, err := full.PutSecret(ctx, c.name, c.in)
		msg := wantAPIError(t, c.what, err, c.status, c.code)
		if c.status == 413 && !strings.Contains(msg, "256 KiB") {
			t.Errorf("oversize message does not say the limit: %s", msg)
		}
	}
	// The largest secret fits the API's 1 MiB body once base64'd.
	big := make([]byte, secrets.MaxValueBytes)
	for i := range big {
		big[i] = byte(i)
	}
	if _, err := full.PutSecret(ctx, "big", apiwire.PutSecret{Data: map[string][]byte{"blob": big}}); err != nil {
		t.Fatalf("a secret at the size limit: %v", err)
	}
	if s, err := full.GetSecret(ctx, "big"); err != nil || !bytes.Equal(s.Data["blob"], big) {
		t.Fatalf("reading the largest secret: %v", err)
	}
	if _, err := full.WatchSecrets(ctx, "", "x", 0); err != nil {
		t.Fatalf("list with an etag and no wait: %v", err)
	}
	req, _ := http.NewRequest(http.MethodGet, e.APIURL()+"/v1/secrets?wait=soon", nil)
	req.Header.Set("Authorization", "Bearer "+e.fullKey)
	resp, err := e.apiHTTP(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("wait=soon: %d", resp.StatusCode)
	}
}

func TestSecretsScopes(t *testing.T) {
	e := startEdge(t, t.TempDir(), noRateLimit)
	ctx := context.Background()
	full := e.client(e.fullKey)
	for _, n := range []string{"team-a/db", "team-b/db"} {
		if _, err := full.PutSecret(ctx, n, apiwire.PutSecret{Data: data("k", "value of "+n)}); err != nil {
			t.Fatal(err)
		}
	}
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http"})

	for _, c := range []struct {
		what string
		c    *client.Client
		want string
	}{
		{"tunnel key", e.client(tk.Key), "tunnel key"},
		{"tunnels:write key", e.client(e.writeKey), "secrets:"},
		{"tunnels:connect key", e.apiKey(t, "", apiwire.ScopeConnect), "secrets:"},
	} {
		_, err := c.c.ListSecrets(ctx, "")
		if msg := wantAPIError(t, c.what+" lists", err, 403, apiwire.CodeForbidden); !strings.Contains(msg, c.want) {
			t.Errorf("%s: message %q does not name %q", c.what, msg, c.want)
		}
		_, err = c.c.GetSecret(ctx, "team-a/db")
		wantAPIError(t, c.what+" gets", err, 403, apiwire.CodeForbidden)
		_, err = c.c.PutSecret(ctx, "team-a/db", apiwire.PutSecret{Data: data("k", "x")})
		wantAPIError(t, c.what+" puts", err, 403, apiwire.CodeForbidden)
		wantAPIError(t, c.what+" deletes", c.c.DeleteSecret(ctx, "team-a/db"), 403, apiwire.CodeForbidden)
	}

	// secrets:write alone writes but never reads values or lists.
	wo := e.apiKey(t, "", apiwire.ScopeSecretsWrite)
	if _, err := wo.PutSecret(ctx, "team-c/db", apiwire.PutSecret{Data: data("k", "v")}); err != nil {
		t.Fatalf("secrets:write puts: %v", err)
	}
	_, err := wo.GetSecret(ctx, "team-c/db")
	if msg := wantAPIError(t, "secrets:write gets", err, 403, apiwire.CodeForbidden); !strings.Contains(msg, apiwire.ScopeSecretsRead) {
		t.Errorf("message does not name secrets:read: %s", msg)
	}
	// secrets:read alone reads but never writes.
	ro := e.apiKey(t, "", apiwire.ScopeSecretsRead)
	if s, err := ro.GetSecret(ctx, "team-c/db"); err != nil || string(s.Data["k"]) != "v" {
		t.Fatalf("secrets:read gets: %+v %v", s, err)
	}
	_, err = ro.PutSecret(ctx, "team-c/db", apiwire.PutSecret{Data: data("k", "x")})
	wantAPIError(t, "secrets:read puts", err, 403, apiwire.CodeForbidden)

	// A key confined to team-a/ neither sees nor touches the rest.
	a := e.apiKey(t, "team-a/", apiwire.ScopeSecretsRead, apiwire.ScopeSecretsWrite)
	if who, err := a.WhoAmI(ctx); err != nil || who.SecretPrefix != "team-a/" {
		t.Fatalf("whoami: %+v %v", who, err)
	}
	if s, err := a.GetSecret(ctx, "team-a/db"); err != nil || string(s.Data["k"]) != "value of team-a/db" {
		t.Fatalf("own secret: %+v %v", s, err)
	}
	_, err = a.GetSecret(ctx, "team-b/db") // exists, reads as absent
	wantAPIError(t, "get outside the prefix", err, 404, apiwire.CodeNotFound)
	_, err = a.PutSecret(ctx, "team-b/db", apiwire.PutSecret{Data: data("k", "stolen")})
	wantAPIError(t, "put outside the prefix", err, 403, apiwire.CodeForbidden)
	wantAPIError(t, "delete outside the prefix", a.DeleteSecret(ctx, "team-b/db"), 403, apiwire.CodeForbidden)
	for _, q := range []string{"", "team-", "team-a/", "team-b/"} {
		l, err := a.ListSecrets(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range l.Items {
			if !strings.HasPrefix(it.Name, "team-a/") {
				t.Errorf("list ?prefix=%s shows %s", q, it.Name)
			}
		}
		if want := q != "team-b/"; (len(l.Items) == 1) != want {
			t.Errorf("list ?prefix=%s: %+v", q, l.Items)
		}
	}
	if s, err := full.GetSecret(ctx, "team-b/db"); err != nil || string(s.Data["k"]) != "value of team-b/db" {
		t.Fatalf("team-b/db changed: %+v %v", s, err)
	}
	_, err = full.CreateAPIKey(ctx, apiwire.CreateAPIKey{Scopes: []string{apiwire.ScopeSecretsRead}, SecretPrefix: "Team/"})
	wantAPIError(t, "bad secret_prefix", err, 400, apiwire.CodeInvalidRequest)
	_, err = full.CreateAPIKey(ctx, apiwire.CreateAPIKey{Scopes: []string{"secrets:admin"}})
	if msg := wantAPIError(t, "unknown scope", err, 400, apiwire.CodeInvalidRequest); !strings.Contains(msg, apiwire.ScopeSecretsWrite) {
		t.Errorf("unknown scope message does not list the secrets scopes: %s", msg)
	}
}

func TestSecretsLimit(t *testing.T) {
	e := startEdge(t, t.TempDir(), noRateLimit, func(c *server.Config) { c.MaxSecrets = 2 })
	ctx := context.Background()
	full := e.client(e.fullKey)
	for _, n := range []string{"a", "b"} {
		if _, err := full.PutSecret(ctx, n, apiwire.PutSecret{Data: data("k", "v")}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := full.PutSecret(ctx, "c", apiwire.PutSecret{Data: data("k", "v")})
	if msg := wantAPIError(t, "third secret", err, 409, apiwire.CodeLimitExceeded); !strings.Contains(msg, "--max-secrets") || !strings.Contains(msg, "2") {
		t.Fatalf("limit message: %s", msg)
	}
	// Changing an existing secret is not a new one.
	if _, err := full.PutSecret(ctx, "a", apiwire.PutSecret{Data: data("k", "w")}); err != nil {
		t.Fatalf("update at the limit: %v", err)
	}
	text := scrapeMetrics(t, e)
	for _, want := range []string{
		"tuna_edge_secrets 2",
		`tuna_edge_limit_refusals_total{limit="secrets"} 1`,
		`tuna_edge_api_requests_total{code="409",route="PUT /v1/secrets/{name...}"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func scrapeMetrics(t *testing.T, e *testEdge) string {
	t.Helper()
	resp, err := e.apiHTTP(t).Get(e.APIURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}

// waitWatching waits until a long poll is waiting on the edge.
func waitWatching(t *testing.T, e *testEdge) {
	t.Helper()
	waitFor(t, "a waiting long poll", func() bool {
		return strings.Contains(scrapeMetrics(t, e), "tuna_edge_secret_watches 1")
	})
}

type watchResult struct {
	list *apiwire.SecretList
	err  error
}

func watch(c *client.Client, prefix, etag string, wait time.Duration) <-chan watchResult {
	ch := make(chan watchResult, 1)
	go func() {
		l, err := c.WatchSecrets(context.Background(), prefix, etag, wait)
		ch <- watchResult{l, err}
	}()
	return ch
}

func TestSecretsLongPoll(t *testing.T) {
	// Read and write timeouts far below the wait: the long poll must
	// outlive them.
	e := startEdge(t, t.TempDir(), noRateLimit, func(c *server.Config) {
		c.APITimeouts.Read, c.APITimeouts.Write = time.Second, time.Second
	})
	ctx := context.Background()
	full := e.client(e.fullKey)
	a := e.apiKey(t, "team-a/", apiwire.ScopeSecretsRead)
	if _, err := full.PutSecret(ctx, "team-a/db", apiwire.PutSecret{Data: data("k", "1")}); err != nil {
		t.Fatal(err)
	}
	first, err := a.ListSecrets(ctx, "")
	if err != nil || len(first.Items) != 1 {
		t.Fatalf("list: %+v %v", first, err)
	}

	// Unchanged: 304 when the wait ends, after the server's timeouts.
	start := time.Now()
	l, err := a.WatchSecrets(ctx, "", first.ETag, 3*time.Second)
	if err != nil || l != nil || time.Since(start) < 3*time.Second {
		t.Fatalf("unchanged watch: %+v %v after %s", l, err, time.Since(start))
	}

	// A change the key cannot see wakes the poll, which lists again and
	// keeps waiting: still 304 at the end.
	res := watch(a, "", first.ETag, 2*time.Second)
	waitWatching(t, e)
	if _, err := full.PutSecret(ctx, "team-b/db", apiwire.PutSecret{Data: data("k", "1")}); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != nil || r.list != nil {
		t.Fatalf("invisible change ended the watch: %+v %v", r.list, r.err)
	}

	// A visible change answers at once with the new list.
	res = watch(a, "", first.ETag, 50*time.Second)
	if _, err := full.PutSecret(ctx, "team-a/db", apiwire.PutSecret{Data: data("k", "2")}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-res:
		if r.err != nil || r.list == nil || r.list.Items[0].Version != 2 || r.list.ETag == first.ETag {
			t.Fatalf("visible change: %+v %v", r.list, r.err)
		}
		first = r.list
	case <-time.After(10 * time.Second):
		t.Fatal("a visible change did not end the watch")
	}

	// Deleting and creating again restarts at version 1: the etag still
	// differs from the one before.
	if err := full.DeleteSecret(ctx, "team-a/db"); err != nil {
		t.Fatal(err)
	}
	gone, _ := a.ListSecrets(ctx, "")
	if _, err := full.PutSecret(ctx, "team-a/db", apiwire.PutSecret{Data: data("k", "3")}); err != nil {
		t.Fatal(err)
	}
	again, err := a.ListSecrets(ctx, "")
	if err != nil || again.Items[0].Version != 1 || again.ETag == first.ETag || again.ETag == gone.ETag {
		t.Fatalf("recreated: %+v %v", again, err)
	}

	// Shutdown ends a waiting poll at once rather than after its wait.
	res = watch(a, "", again.ETag, 60*time.Second)
	waitWatching(t, e)
	start = time.Now()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-res:
		if r.err != nil || r.list != nil {
			t.Fatalf("watch at shutdown: %+v %v", r.list, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("shutdown did not end the watch")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("shutdown took %s: it waited for the long poll", d)
	}
}
