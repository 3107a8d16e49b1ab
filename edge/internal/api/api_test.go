package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/edge/internal/api"
	"code.tuna.am/tuna/k8s-operator/edge/internal/dnsverify"
	"code.tuna.am/tuna/k8s-operator/edge/internal/keyhash"
	"code.tuna.am/tuna/k8s-operator/edge/internal/registry"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
	"code.tuna.am/tuna/k8s-operator/edge/internal/tcpports"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

const base = "tuna.localhost"

type fixture struct {
	url                             string
	st                              *store.Store
	ports                           [2]int // the TCP range
	full, write, connect, tunnelKey string
	http                            *http.Client
	fingerprint                     string
	// logs is what the API logged (its audit lines).
	logs *syncBuffer
}

// syncBuffer is a bytes.Buffer that the API's handlers may write while a
// test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newFixture serves the API on a loopback listener with a real store.
func newFixture(t *testing.T, dnsAddr string) *fixture {
	t.Helper()
	return newFixtureWith(t, dnsAddr, nil)
}

// newFixtureWith is newFixture with tune applied to the API's config.
func newFixtureWith(t *testing.T, dnsAddr string, tune func(*api.Config)) *fixture {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r := ports.Range(t, 2)
	pm := tcpports.New("127.0.0.1", r[0], r[1], nil)
	t.Cleanup(pm.Close)
	logs := &syncBuffer{}
	cfg := api.Config{
		Logger:     slog.New(slog.NewTextHandler(logs, nil)),
		BaseDomain: base, CNAMETarget: "edge." + base,
		TCPPortFirst: r[0], TCPPortLast: r[1], PublicTCPHost: "127.0.0.1", Ports: pm,
		EdgeInfo: func() apiwire.EdgeInfo { return apiwire.EdgeInfo{BaseDomain: base, SSHHostKey: "ssh-ed25519 AAAA"} },
		Verifier: dnsverify.New(dnsAddr),
	}
	if tune != nil {
		tune(&cfg)
	}
	srv := api.New(cfg, st, registry.New(), nil)
	// TLS as the edge serves it; the clients pin the test certificate.
	hs := httptest.NewTLSServer(srv)
	t.Cleanup(hs.Close)
	f := &fixture{url: hs.URL, st: st, ports: r, http: hs.Client(), fingerprint: apiwire.Fingerprint(hs.Certificate().Raw), logs: logs}
	mk := func(scope string) string {
		k, err := api.CreateAPIKey(st, scope, []string{scope}, func() store.APIKey { return store.APIKey{CreatedAt: time.Now()} })
		if err != nil {
			t.Fatal(err)
		}
		return k.Key
	}
	f.full, f.write, f.connect = mk(apiwire.ScopeFull), mk(apiwire.ScopeWrite), mk(apiwire.ScopeConnect)
	tk, err := f.c(f.write).CreateTunnelKey(context.Background(), apiwire.CreateTunnelKey{Protocol: "http"})
	if err != nil {
		t.Fatal(err)
	}
	f.tunnelKey = tk.Key
	return f
}

func (f *fixture) c(key string) *client.Client {
	return client.New(f.url, key, client.WithTrust(client.Trust{Fingerprint: f.fingerprint}))
}

// raw sends a request with a literal body and returns status and error body.
func (f *fixture) raw(t *testing.T, key, method, path, body string) (int, map[string]string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := f.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	out := map[string]string{}
	_ = json.Unmarshal(data, &out)
	return resp.StatusCode, out, resp.Header
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := apiwire.CodeOf(err); got != code {
		t.Fatalf("error = %v, want code %s", err, code)
	}
}

func TestAuthAndScopes(t *testing.T) {
	f := newFixture(t, "")
	ctx := context.Background()

	cases := []struct {
		name, key, method, path string
		status                  int
		code                    string
	}{
		{"no key", "", "GET", "/v1/edge", 401, apiwire.CodeUnauthorized},
		{"bad key", "tuna_0123456789abcdef_nope", "GET", "/v1/edge", 401, apiwire.CodeUnauthorized},
		{"tunnel key calls API", f.tunnelKey, "GET", "/v1/edge", 403, apiwire.CodeForbidden},
		{"tunnel key lists domains", f.tunnelKey, "GET", "/v1/domains", 403, apiwire.CodeForbidden},
		{"connect key lists domains", f.connect, "GET", "/v1/domains", 403, apiwire.CodeForbidden},
		{"connect key issues tunnel keys", f.connect, "POST", "/v1/tunnel-keys", 403, apiwire.CodeForbidden},
		{"write key manages API keys", f.write, "GET", "/v1/api-keys", 403, apiwire.CodeForbidden},
		{"unknown route", f.full, "GET", "/v1/nothing", 404, apiwire.CodeNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body, hdr := f.raw(t, c.key, c.method, c.path, "")
			if status != c.status || body["code"] != c.code || body["error"] == "" {
				t.Fatalf("%s %s = %d %v, want %d %s", c.method, c.path, status, body, c.status, c.code)
			}
			if id := hdr.Get("X-Request-Id"); id == "" || id != body["request_id"] {
				t.Fatalf("X-Request-Id %q vs request_id %q", id, body["request_id"])
			}
		})
	}
	t.Run("tunnel key message is clear", func(t *testing.T) {
		_, body, _ := f.raw(t, f.tunnelKey, "GET", "/v1/whoami", "")
		if !strings.Contains(body["error"], "tunnel key") {
			t.Fatalf("message %q does not say it is a tunnel key", body["error"])
		}
	})
	t.Run("edge and whoami with any API key", func(t *testing.T) {
		for _, k := range []string{f.full, f.write, f.connect} {
			info, err := f.c(k).Edge(ctx)
			if err != nil || info.SSHHostKey == "" {
				t.Fatalf("edge: %+v %v", info, err)
			}
			who, err := f.c(k).WhoAmI(ctx)
			if err != nil || len(who.Scopes) != 1 || !strings.HasPrefix(k, "tuna_"+who.KeyID+"_") {
				t.Fatalf("whoami: %+v %v", who, err)
			}
		}
	})
	t.Run("openapi without auth", func(t *testing.T) {
		resp, err := f.http.Get(f.url + "/v1/openapi.json")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc struct {
			OpenAPI string         `json:"openapi"`
			Paths   map[string]any `json:"paths"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.") || doc.Paths["/v1/tunnel-keys"] == nil {
			t.Fatalf("openapi: %+v %v", doc, err)
		}
	})
}

func TestStrictJSON(t *testing.T) {
	f := newFixture(t, "")
	cases := []struct {
		name, body, code, mention string
	}{
		{"unknown field", `{"subdomain":"a","colour":"red"}`, apiwire.CodeUnknownField, "colour"},
		{"malformed", `{"subdomain":`, apiwire.CodeInvalidRequest, "malformed"},
		{"empty", ``, apiwire.CodeInvalidRequest, "empty"},
		{"wrong type", `{"subdomain":5}`, apiwire.CodeInvalidRequest, "malformed"},
		{"trailing data", `{"subdomain":"a"} {}`, apiwire.CodeInvalidRequest, "after"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body, _ := f.raw(t, f.write, "POST", "/v1/domains", c.body)
			if status != 400 || body["code"] != c.code || !strings.Contains(body["error"], c.mention) {
				t.Fatalf("got %d %v, want 400 %s mentioning %q", status, body, c.code, c.mention)
			}
		})
	}
}

func TestAPIKeys(t *testing.T) {
	f := newFixture(t, "")
	ctx := context.Background()
	c := f.c(f.full)
	k, err := c.CreateAPIKey(ctx, apiwire.CreateAPIKey{Name: "ci", Scopes: []string{apiwire.ScopeWrite}})
	if err != nil || !strings.HasPrefix(k.Key, "tuna_"+k.ID+"_") || k.Name != "ci" {
		t.Fatalf("create: %+v %v", k, err)
	}
	if _, err := f.c(k.Key).ListDomains(ctx); err != nil {
		t.Fatalf("new key does not work: %v", err)
	}
	list, err := c.ListAPIKeys(ctx)
	if err != nil || len(list) != 4 {
		t.Fatalf("list: %d %v", len(list), err)
	}
	for _, item := range list {
		if item.Key != "" {
			t.Fatal("list leaked a secret")
		}
	}
	_, err = c.CreateAPIKey(ctx, apiwire.CreateAPIKey{Scopes: []string{"admin"}})
	wantCode(t, err, apiwire.CodeInvalidRequest)
	_, err = c.CreateAPIKey(ctx, apiwire.CreateAPIKey{})
	wantCode(t, err, apiwire.CodeInvalidRequest)
	if err := c.DeleteAPIKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	_, err = f.c(k.Key).ListDomains(ctx)
	wantCode(t, err, apiwire.CodeUnauthorized)
	wantCode(t, c.DeleteAPIKey(ctx, k.ID), apiwire.CodeNotFound)
	// The store never holds the secret.
	who, _ := c.WhoAmI(ctx)
	rec, err := f.st.GetAPIKey(who.KeyID)
	if err != nil || !bytes.Equal(rec.Hash, keyhash.Hash(f.full)) {
		t.Fatalf("stored record %+v %v", rec, err)
	}
}

func TestTunnelKeys(t *testing.T) {
	f := newFixture(t, "")
	ctx := context.Background()
	c := f.c(f.write)
	if _, err := c.CreateDomain(ctx, apiwire.CreateDomain{Domain: "app.example.com"}); err != nil {
		t.Fatal(err)
	}
	ok := []struct {
		in   apiwire.CreateTunnelKey
		addr string
	}{
		{apiwire.CreateTunnelKey{Protocol: "http", Address: "web", Labels: map[string]string{"cluster": "a", "uid": "1"}}, "web." + base},
		{apiwire.CreateTunnelKey{Protocol: "http", Address: "Api." + base, Labels: map[string]string{"cluster": "a", "uid": "2"}}, "api." + base},
		{apiwire.CreateTunnelKey{Protocol: "http", Address: "app.example.com", Labels: map[string]string{"cluster": "b"}}, "app.example.com"},
		{apiwire.CreateTunnelKey{Protocol: "tcp", Address: "pg"}, "pg"},
		{apiwire.CreateTunnelKey{Protocol: "tcp", Address: strconv.Itoa(f.ports[1])}, strconv.Itoa(f.ports[1])},
		{apiwire.CreateTunnelKey{Protocol: "http"}, ""},
	}
	var ids []string
	for _, o := range ok {
		k, err := c.CreateTunnelKey(ctx, o.in)
		if err != nil || k.Address != o.addr || !strings.HasPrefix(k.Key, "tunt_"+k.ID+"_") || k.Session != nil {
			t.Fatalf("create %+v: %+v %v", o.in, k, err)
		}
		ids = append(ids, k.ID)
	}
	bad := []struct {
		in   apiwire.CreateTunnelKey
		code string
	}{
		{apiwire.CreateTunnelKey{}, apiwire.CodeInvalidRequest},
		{apiwire.CreateTunnelKey{Protocol: "udp"}, apiwire.CodeInvalidRequest},
		{apiwire.CreateTunnelKey{Protocol: "http", Address: "bad_label"}, apiwire.CodeInvalidDomain},
		{apiwire.CreateTunnelKey{Protocol: "http", Address: "other.example.com"}, apiwire.CodeInvalidDomain},
		{apiwire.CreateTunnelKey{Protocol: "tcp", Address: strconv.Itoa(f.ports[1] + 1)}, apiwire.CodeInvalidRequest},
		{apiwire.CreateTunnelKey{Protocol: "tcp", Address: "Not Valid"}, apiwire.CodeInvalidRequest},
	}
	for _, b := range bad {
		_, err := c.CreateTunnelKey(ctx, b.in)
		wantCode(t, err, b.code)
	}
	all, err := c.ListTunnelKeys(ctx, nil)
	if err != nil || len(all) != 7 { // six here plus the fixture's
		t.Fatalf("list all: %d %v", len(all), err)
	}
	a, err := c.ListTunnelKeys(ctx, map[string]string{"cluster": "a"})
	if err != nil || len(a) != 2 {
		t.Fatalf("label cluster=a: %d %v", len(a), err)
	}
	one, err := c.ListTunnelKeys(ctx, map[string]string{"cluster": "a", "uid": "2"})
	if err != nil || len(one) != 1 || one[0].ID != ids[1] || one[0].Key != "" {
		t.Fatalf("label cluster=a,uid=2: %+v %v", one, err)
	}
	got, err := c.GetTunnelKey(ctx, ids[0])
	if err != nil || got.Address != "web."+base || got.Labels["uid"] != "1" {
		t.Fatalf("get: %+v %v", got, err)
	}
	if err := c.RevokeTunnelKey(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetTunnelKey(ctx, ids[0])
	wantCode(t, err, apiwire.CodeNotFound)
	wantCode(t, c.RevokeTunnelKey(ctx, ids[0]), apiwire.CodeNotFound)
}

func TestDomains(t *testing.T) {
	f := newFixture(t, "")
	ctx := context.Background()
	c := f.c(f.write)
	d, err := c.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "shop"})
	if err != nil || d.Name != "shop."+base || !d.Verified || d.Custom || len(d.DNSRecords) != 0 {
		t.Fatalf("subdomain: %+v %v", d, err)
	}
	_, err = c.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "shop"})
	wantCode(t, err, apiwire.CodeNameTaken)
	_, err = c.CreateDomain(ctx, apiwire.CreateDomain{Domain: "shop." + base})
	wantCode(t, err, apiwire.CodeNameTaken)
	for _, in := range []apiwire.CreateDomain{
		{Subdomain: "Bad_Name"}, {Subdomain: "-x"}, {Domain: "nodot"}, {Domain: "a..b.com"}, {Domain: "x.y." + base}, {Domain: base},
	} {
		_, err := c.CreateDomain(ctx, in)
		wantCode(t, err, apiwire.CodeInvalidDomain)
	}
	for _, in := range []apiwire.CreateDomain{{}, {Subdomain: "a", Domain: "b.com"}} {
		_, err := c.CreateDomain(ctx, in)
		wantCode(t, err, apiwire.CodeInvalidRequest)
	}
	cd, err := c.CreateDomain(ctx, apiwire.CreateDomain{Domain: "App.Example.com"})
	if err != nil || cd.Name != "app.example.com" || !cd.Custom || cd.Verified || len(cd.DNSRecords) != 2 {
		t.Fatalf("custom: %+v %v", cd, err)
	}
	if r := cd.DNSRecords[0]; r.Type != "CNAME" || r.Name != "app.example.com" || r.Value != "edge."+base {
		t.Errorf("CNAME record %+v", r)
	}
	if r := cd.DNSRecords[1]; r.Type != "TXT" || r.Name != "_tuna-challenge.app.example.com" || len(r.Value) != 32 {
		t.Errorf("TXT record %+v", r)
	}
	if !strings.Contains(cd.VerifyError, "disabled") {
		t.Errorf("verify_error %q", cd.VerifyError)
	}
	list, err := c.ListDomains(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %d %v", len(list), err)
	}
	if v, err := c.VerifyDomain(ctx, "shop."+base, ""); err != nil || !v.Verified {
		t.Fatalf("verify subdomain: %+v %v", v, err)
	}
	if err := c.DeleteDomain(ctx, "shop."+base, ""); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetDomain(ctx, "shop."+base)
	wantCode(t, err, apiwire.CodeNotFound)
	_, err = c.VerifyDomain(ctx, "shop."+base, "")
	wantCode(t, err, apiwire.CodeNotFound)
	wantCode(t, c.DeleteDomain(ctx, "shop."+base, ""), apiwire.CodeNotFound)
}

func TestTCPEndpoints(t *testing.T) {
	f := newFixture(t, "")
	ctx := context.Background()
	c := f.c(f.write)
	p0, p1 := f.ports[0], f.ports[1]
	a, err := c.CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: "pg"})
	if err != nil || a.Port != p0 || a.Address != net.JoinHostPort("127.0.0.1", strconv.Itoa(p0)) {
		t.Fatalf("first: %+v %v", a, err)
	}
	b, err := c.CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: "redis"})
	if err != nil || b.Port != p1 {
		t.Fatalf("second: %+v %v", b, err)
	}
	_, err = c.CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: "mq"})
	wantCode(t, err, apiwire.CodePortsExhausted)
	_, err = c.CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: "pg"})
	wantCode(t, err, apiwire.CodeNameTaken)
	for _, alias := range []string{"", "5432", "Bad Alias"} {
		_, err = c.CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: alias})
		wantCode(t, err, apiwire.CodeInvalidRequest)
	}
	if err := c.DeleteTCPEndpoint(ctx, "pg", ""); err != nil {
		t.Fatal(err)
	}
	// The freed lowest port is handed out again.
	m, err := c.CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: "mq"})
	if err != nil || m.Port != p0 {
		t.Fatalf("reuse: %+v %v", m, err)
	}
	got, err := c.GetTCPEndpoint(ctx, "redis")
	if err != nil || got.Port != p1 {
		t.Fatalf("get: %+v %v", got, err)
	}
	list, err := c.ListTCPEndpoints(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	_, err = c.GetTCPEndpoint(ctx, "pg")
	wantCode(t, err, apiwire.CodeNotFound)
	wantCode(t, c.DeleteTCPEndpoint(ctx, "pg", ""), apiwire.CodeNotFound)
}

func TestTCPEndpointSkipsAPortAnotherProcessHolds(t *testing.T) {
	f := newFixture(t, "")
	ctx := context.Background()
	c := f.c(f.write)
	foreign, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(f.ports[0])))
	if err != nil {
		t.Fatal(err)
	}
	defer foreign.Close()
	a, err := c.CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: "pg"})
	if err != nil || a.Port != f.ports[1] {
		t.Fatalf("with port %d held by another process: %+v %v, want port %d", f.ports[0], a, err, f.ports[1])
	}
	_, err = c.CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: "redis"})
	wantCode(t, err, apiwire.CodePortsExhausted)
	if !strings.Contains(err.Error(), "held by another process") {
		t.Fatalf("exhaustion error does not say why: %v", err)
	}
	// Once the other process lets go, the port is handed out.
	_ = foreign.Close()
	b, err := c.CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: "redis"})
	if err != nil || b.Port != f.ports[0] {
		t.Fatalf("after the foreign listener closed: %+v %v", b, err)
	}
}
