package access_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
)

// rawGet sends one HTTP/1.1 request on a new connection to the edge: the
// relay takes it unless it hands it to net/http (proto "HTTP/1.0" sends
// it straight to net/http).
func (w *world) rawGet(t *testing.T, proto, host, path string, hdr ...string) (*answer, string) {
	t.Helper()
	c, err := net.Dial("tcp", w.httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	req := fmt.Sprintf("GET %s %s\r\nHost: %s\r\nConnection: close\r\n", path, proto, host+"."+baseDomain)
	for i := 0; i+1 < len(hdr); i += 2 {
		req += hdr[i] + ": " + hdr[i+1] + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	return read(res)
}

// The rules that need no login, on both engines of the edge: ip rules,
// deny, rate limits with 429 and Retry-After, header edits, ambiguous
// paths; a policy that is not in force fails closed.
func TestRulesWithoutLogin(t *testing.T) {
	w := start(t)
	w.putPolicy(apiwire.AccessPolicy{Name: "rules",
		RateLimits:      &apiwire.AccessRateLimits{PerClientIP: &apiwire.RequestRate{Requests: 5, PeriodSeconds: 60}},
		RequestHeaders:  &apiwire.HeaderEdits{Set: map[string]string{"X-Custom": "from-edge"}, Remove: []string{"X-Debug"}},
		ResponseHeaders: &apiwire.HeaderEdits{Set: map[string]string{"Strict-Transport-Security": "max-age=600"}, Remove: []string{"Server"}},
		Rules: []apiwire.AccessRule{
			{Name: "no-bad-net", IP: &apiwire.IPRule{DenyCIDRs: []string{"198.51.100.0/24"}}},
			{Name: "internal", PathPrefixes: []string{"/internal/"}, Deny: true},
			{Name: "office", PathPrefixes: []string{"/office/"}, IP: &apiwire.IPRule{AllowCIDRs: []string{"203.0.113.0/24"}}},
			{Name: "rest", Public: true},
		}})
	w.publish("split", "rules")
	for _, proto := range []string{"HTTP/1.1", "HTTP/1.0"} {
		t.Run(proto, func(t *testing.T) {
			res, body := w.rawGet(t, proto, "split", "/hello", "X-Custom", "from-client", "X-Debug", "1")
			if res.StatusCode != 200 || !strings.Contains(body, `"custom":"from-edge"`) {
				t.Fatalf("public path: %d %s", res.StatusCode, body)
			}
			if res.Header.Get("Server") != "" || res.Header.Get("Strict-Transport-Security") != "max-age=600" {
				t.Errorf("the answer's edits: %v", res.Header)
			}
			if res, _ := w.rawGet(t, proto, "split", "/internal/x"); res.StatusCode != http.StatusForbidden {
				t.Errorf("a deny rule: %d", res.StatusCode)
			}
			if res, _ := w.rawGet(t, proto, "split", "/office/x"); res.StatusCode != http.StatusForbidden {
				t.Errorf("an ip rule that does not admit loopback: %d", res.StatusCode)
			}
			for _, p := range []string{"/internal/../hello", "/x/%2e%2e/internal/", "//internal/", "/a%2Fb"} {
				if res, _ := w.rawGet(t, proto, "split", p); res.StatusCode != http.StatusBadRequest {
					t.Errorf("ambiguous path %s: %d", p, res.StatusCode)
				}
			}
		})
	}
	// Five requests a minute per client address, counted on both engines:
	// the two let through above, three more, then 429.
	for i := range 3 {
		if res, _ := w.rawGet(t, "HTTP/1.1", "split", "/hello"); res.StatusCode != 200 {
			t.Fatalf("request %d of the budget: %d", i+3, res.StatusCode)
		}
	}
	res, body := w.rawGet(t, "HTTP/1.1", "split", "/hello")
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" || !strings.Contains(body, "Too many requests") {
		t.Fatalf("past the rate limit: %d Retry-After %q", res.StatusCode, res.Header.Get("Retry-After"))
	}

	// A bind that names a policy the edge does not have serves nothing
	// until it has it; deleting the policy closes the address again.
	w.publish("brief", "later")
	if res, body := w.rawGet(t, "HTTP/1.1", "brief", "/"); res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "not in force") {
		t.Fatalf("an address whose policy is missing: %d %s", res.StatusCode, body)
	}
	w.putPolicy(apiwire.AccessPolicy{Name: "later", Rules: []apiwire.AccessRule{{Public: true}}})
	if res, _ := w.rawGet(t, "HTTP/1.1", "brief", "/"); res.StatusCode != 200 {
		t.Fatalf("once the policy is there: %d", res.StatusCode)
	}
	if err := w.api.DeleteAccessPolicy(context.Background(), owner, "later"); err != nil {
		t.Fatal(err)
	}
	if res, _ := w.rawGet(t, "HTTP/1.1", "brief", "/"); res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("after the policy is deleted: %d", res.StatusCode)
	}
}

// A reserved domain's policy guards it whoever binds it, and wins over
// the bind's; changing it takes effect on the live address.
func TestDomainPolicy(t *testing.T) {
	w := start(t)
	ctx := context.Background()
	w.putPolicy(apiwire.AccessPolicy{Name: "closed", Rules: []apiwire.AccessRule{{Deny: true}}})
	w.putPolicy(apiwire.AccessPolicy{Name: "open", Rules: []apiwire.AccessRule{{Public: true}}})
	if _, err := w.api.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "other", Sharing: apiwire.Sharing{Owner: owner}}); err != nil {
		t.Fatal(err)
	}
	w.publish("other", "open")
	if res, _ := w.rawGet(t, "HTTP/1.1", "other", "/"); res.StatusCode != 200 {
		t.Fatalf("the bind's policy: %d", res.StatusCode)
	}
	d, err := w.api.SetDomainAccessPolicy(ctx, "other."+baseDomain, owner, "closed")
	if err != nil || d.AccessPolicy != "closed" {
		t.Fatalf("setting the domain's policy: %v %+v", err, d)
	}
	if res, _ := w.rawGet(t, "HTTP/1.1", "other", "/"); res.StatusCode != http.StatusForbidden {
		t.Fatalf("the domain's policy on a live address: %d", res.StatusCode)
	}
	if _, err := w.api.SetDomainAccessPolicy(ctx, "other."+baseDomain, owner, ""); err != nil {
		t.Fatal(err)
	}
	if res, _ := w.rawGet(t, "HTTP/1.1", "other", "/"); res.StatusCode != 200 {
		t.Fatalf("detached: %d", res.StatusCode)
	}
}

// A TCP address takes a policy of ip rules; one with any other rule, or
// one that is missing, refuses every connection.
func TestTCPPolicy(t *testing.T) {
	w := start(t)
	ctx := context.Background()
	w.putPolicy(apiwire.AccessPolicy{Name: "loopback", Rules: []apiwire.AccessRule{{IP: &apiwire.IPRule{AllowCIDRs: []string{"127.0.0.0/8"}}}}})
	w.putPolicy(apiwire.AccessPolicy{Name: "elsewhere", Rules: []apiwire.AccessRule{{IP: &apiwire.IPRule{AllowCIDRs: []string{"203.0.113.0/24"}}}}})
	w.putPolicy(apiwire.AccessPolicy{Name: "login", Rules: []apiwire.AccessRule{{OIDC: w.oidcRule()}}})
	for _, tc := range []struct {
		policy string
		open   bool
	}{{"loopback", true}, {"elsewhere", false}, {"login", false}, {"missing", false}} {
		t.Run(tc.policy, func(t *testing.T) {
			ep, err := w.api.CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: "db-" + tc.policy, Sharing: apiwire.Sharing{Owner: owner}})
			if err != nil {
				t.Fatal(err)
			}
			tk, err := w.api.CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "tcp", Address: ep.Alias, Owner: owner})
			if err != nil {
				t.Fatal(err)
			}
			info, _ := w.api.Edge(ctx)
			s, err := tunnelclient.Dial(ctx, tunnelclient.Config{Addr: info.SSHAddr, Key: tk.Key, HostKey: info.SSHHostKey})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Bind(ctx, protocol.BindRequest{Protocol: "tcp", Alias: ep.Alias, AccessPolicy: tc.policy}); err != nil {
				t.Fatal(err)
			}
			go func() {
				for {
					c, err := s.Listener().Accept()
					if err != nil {
						return
					}
					_, _ = io.WriteString(c, "hello\n")
					_ = c.Close()
				}
			}()
			c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ep.Port))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			if open := err == nil && line == "hello\n"; open != tc.open {
				t.Fatalf("policy %s: connection served %v (%q, %v), want %v", tc.policy, open, line, err, tc.open)
			}
		})
	}
}
