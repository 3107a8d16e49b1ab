package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"code.tuna.am/tuna/k8s-operator/edge/access/link"
	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

// On a cluster of edge nodes any node checks any session: the access keys
// are in the shared state, sealed; a rotation through one node reaches the
// others, which keep opening the sessions made before it until the next;
// the uses of a link are counted once for the cluster. etcd holds none of
// a policy's secrets in clear.
func TestClusterAccessSessions(t *testing.T) {
	c := startCluster(t, 2)
	n0, n1 := c.nodes[0], c.nodes[1]
	ctx := context.Background()
	key := bytes.Repeat([]byte("L"), 32)
	const owner = "c1/team-a"
	htpasswd := "partner:$2y$04$0zOJr2Ffx7M8bUwxnfNWce6ZHHwU3mnyQ/HTMGHqhYZ/2zrGnJrxm\n"
	if _, err := n0.client(n0.writeKey).PutAccessPolicy(ctx, apiwire.AccessPolicy{Name: "share", Owner: owner, Rules: []apiwire.AccessRule{
		{PathPrefixes: []string{"/partners/"}, BasicAuth: &apiwire.BasicAuthRule{Htpasswd: htpasswd}},
		{PathPrefixes: []string{"/staff/"}, OIDC: &apiwire.OIDCRule{IssuerURL: "https://idp.example.com", ClientID: "edge", ClientSecret: "oidc-client-secret-value"}},
		{Links: &apiwire.LinksRule{Key: string(key)}},
	}}); err != nil {
		t.Fatal(err)
	}
	tk := n0.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "app", Owner: owner})
	for _, n := range c.nodes {
		s := n.mustDial(t, tk.Key)
		bind(t, s, protocol.BindRequest{Protocol: "http", Subdomain: "app", AccessPolicy: "share"})
		serveHTTP(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "in "+r.URL.Path) }))
	}
	host := "app." + baseDomain
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 10 * time.Second}
	get := func(n *testEdge, path, cookie string) (int, string, []*http.Cookie) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+n.HTTPAddr()+path, nil)
		req.Host = host
		if cookie != "" {
			req.Header.Set("Cookie", "tuna-session="+cookie)
		}
		res, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b), res.Cookies()
	}
	redeem := func(n *testEdge, uses int) string {
		t.Helper()
		tok, _, err := link.Sign(key, link.Link{Host: host, Path: "/", Expires: time.Now().Add(time.Hour), Uses: uses})
		if err != nil {
			t.Fatal(err)
		}
		code, body, cookies := get(n, link.Path+"?t="+url.QueryEscape(tok), "")
		if code != http.StatusSeeOther {
			t.Fatalf("redeeming a link on %s: %d %s", n.cfg.NodeName, code, body)
		}
		for _, ck := range cookies {
			if ck.Name == "tuna-session" {
				return ck.Value
			}
		}
		t.Fatal("no session cookie")
		return ""
	}
	open := func(what, cookie string, want int, nodes ...*testEdge) {
		t.Helper()
		for _, n := range nodes {
			if code, body, _ := get(n, "/doc", cookie); code != want {
				t.Fatalf("%s on %s: %d %s, want %d", what, n.cfg.NodeName, code, body, want)
			}
		}
	}
	first := redeem(n0, 0)
	open("a session made on node 0", first, http.StatusOK, n0, n1)

	// One use for the cluster: the second, on another node, is refused.
	tok, _, _ := link.Sign(key, link.Link{ID: "once", Host: host, Path: "/", Expires: time.Now().Add(time.Hour), Uses: 1})
	if code, _, _ := get(n0, link.Path+"?t="+url.QueryEscape(tok), ""); code != http.StatusSeeOther {
		t.Fatalf("a one-use link: %d", code)
	}
	if code, body, _ := get(n1, link.Path+"?t="+url.QueryEscape(tok), ""); code != http.StatusForbidden || !strings.Contains(body, "used up") {
		t.Fatalf("a one-use link used again on the other node: %d %s", code, body)
	}

	rotate := func() {
		t.Helper()
		keys, err := n0.client(n0.fullKey).RotateAccessKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "node 1 to follow the rotation", func() bool {
			k, err := n1.client(n1.fullKey).AccessKeys(ctx)
			return err == nil && slices.Equal(k.SessionKeys, keys.SessionKeys)
		})
	}
	rotate()
	second := redeem(n1, 0)
	open("a session made after the rotation", second, http.StatusOK, n0, n1)
	open("a session made before the rotation", first, http.StatusOK, n0, n1)
	rotate()
	open("a session made two rotations ago", first, http.StatusForbidden, n0, n1)
	open("a session made one rotation ago", second, http.StatusOK, n0, n1)

	ec, err := clientv3.New(clientv3.Config{Endpoints: c.etcd.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	resp, err := ec.Get(ctx, "", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var dump bytes.Buffer
	for _, kv := range resp.Kvs {
		dump.Write(kv.Key)
		dump.Write(kv.Value)
	}
	for what, s := range map[string]string{"the OIDC client secret": "oidc-client-secret-value", "the htpasswd hash": "0zOJr2Ffx7M8bUwxnfNWce6ZHHwU3mnyQ",
		"the links key": string(key), "the issuer (the policy is sealed whole)": "idp.example.com"} {
		if strings.Contains(dump.String(), s) {
			t.Errorf("etcd holds %s in clear", what)
		}
	}
	if !strings.Contains(dump.String(), "/tuna-edge/data/access_policies/"+owner+"/share") {
		t.Error("the policy's record is not where expected")
	}
}
