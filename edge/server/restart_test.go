package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/dnstest"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
)

func hello(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello from the agent") }

func TestStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	e1 := startEdge(t, dir)
	c1 := e1.client(e1.writeKey)
	if _, err := c1.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "kept"}); err != nil {
		t.Fatal(err)
	}
	ep, err := c1.CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: "pg"})
	if err != nil {
		t.Fatal(err)
	}
	tk := e1.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "kept", Labels: map[string]string{"uid": "u1"}})
	info1 := e1.info(t)
	s1 := e1.mustDial(t, tk.Key)
	url1 := bind(t, s1, protocol.BindRequest{Protocol: "http"}).URL
	serveHTTP(t, s1, http.HandlerFunc(hello))
	if code, body, _ := e1.get(t, "kept."+baseDomain, "/", nil); code != 200 || body != "hello from the agent" {
		t.Fatalf("before restart: %d %q", code, body)
	}
	addrs := [3]string{e1.APIURL(), e1.SSHAddr(), e1.HTTPAddr()}
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}
	_ = waitDone(t, s1) // the edge closed it; how is not what this test checks

	// Same data dir and addresses: a restarted edge.
	e2 := startEdge(t, dir, func(c *server.Config) {
		c.APIListen = strings.TrimPrefix(addrs[0], "https://")
		c.SSHListen, c.HTTPListen = addrs[1], addrs[2]
		c.TCPPortRange = e1.cfg.TCPPortRange
	})
	info2 := e2.info(t)
	if info2.SSHHostKey != info1.SSHHostKey {
		t.Fatal("host key changed across restart")
	}
	c2 := e2.client(e1.writeKey) // a key issued before the restart
	if d, err := c2.GetDomain(ctx, "kept."+baseDomain); err != nil || !d.Verified {
		t.Fatalf("domain after restart: %+v %v", d, err)
	}
	if got, err := c2.GetTCPEndpoint(ctx, "pg"); err != nil || got.Port != ep.Port {
		t.Fatalf("tcp endpoint after restart: %+v %v", got, err)
	}
	if keys, err := c2.ListTunnelKeys(ctx, map[string]string{"uid": "u1"}); err != nil || len(keys) != 1 || keys[0].Session != nil {
		t.Fatalf("tunnel keys after restart: %+v %v", keys, err)
	}
	// Known but not connected until the agent is back.
	if code, _, _ := e2.get(t, "kept."+baseDomain, "/", nil); code != http.StatusBadGateway {
		t.Fatalf("before reconnect: %d", code)
	}
	s2 := e2.mustDial(t, tk.Key)
	if url2 := bind(t, s2, protocol.BindRequest{Protocol: "http"}).URL; url2 != url1 {
		t.Fatalf("URL changed: %q -> %q", url1, url2)
	}
	serveHTTP(t, s2, http.HandlerFunc(hello))
	if code, body, _ := e2.get(t, "kept."+baseDomain, "/", nil); code != 200 || body != "hello from the agent" {
		t.Fatalf("after restart: %d %q", code, body)
	}
}

func TestCustomDomainTunnel(t *testing.T) {
	dns := dnstest.Start(t)
	e := startEdge(t, t.TempDir(), func(c *server.Config) { c.DNSResolver = dns.Addr() })
	ctx := context.Background()
	c := e.client(e.writeKey)
	d, err := c.CreateDomain(ctx, apiwire.CreateDomain{Domain: "www.example.org"})
	if err != nil {
		t.Fatal(err)
	}
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "www.example.org"})
	s := e.mustDial(t, tk.Key)
	for _, req := range []protocol.BindRequest{{Protocol: "http", Domain: "www.example.org"}, {Protocol: "http"}} {
		if _, err := s.Bind(ctx, req); err == nil || !strings.Contains(err.Error(), "not verified") {
			t.Fatalf("bind %+v before verification: %v", req, err)
		}
	}
	for _, r := range d.DNSRecords {
		if r.Type == "CNAME" {
			dns.SetCNAME(r.Name, r.Value)
		} else {
			dns.SetTXT(r.Name, r.Value)
		}
	}
	if d, err = c.VerifyDomain(ctx, d.Name, ""); err != nil || !d.Verified {
		t.Fatalf("verify: %+v %v", d, err)
	}
	r := bind(t, s, protocol.BindRequest{Protocol: "http", Domain: "www.example.org"})
	_, port, _ := net.SplitHostPort(e.HTTPAddr())
	if r.URL != "http://www.example.org:"+port {
		t.Fatalf("URL = %q", r.URL)
	}
	serveHTTP(t, s, http.HandlerFunc(hello))
	if code, body, _ := e.get(t, "WWW.example.org", "/", nil); code != 200 || body != "hello from the agent" {
		t.Fatalf("custom domain: %d %q", code, body)
	}
}
