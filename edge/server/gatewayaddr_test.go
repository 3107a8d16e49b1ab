package server_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// A Gateway address serves every request that reaches it, whatever its
// Host, through the tunnel of the key issued for it, with the Host as the
// client sent it; an --any-host edge binds a host outside its base domain
// through the key its owner claimed. GET /v1/edge says both.
func TestGatewayAddressAndAnyHost(t *testing.T) {
	// Two loopback addresses of this process's own port block, so that no
	// other test's listener shares them.
	p := ports.Range(t, 1)[0]
	a := netip.MustParseAddr(fmt.Sprintf("127.%d.%d.1", p>>8, p&0xff))
	b := a.Next()
	port := ports.Range(t, 1)[0]
	e := startEdge(t, t.TempDir(), func(c *server.Config) {
		c.AnyHost = true
		c.GatewayAddresses = []netip.Addr{a, b}
		c.GatewayHTTPPort = port
	})
	info := e.info(t)
	if !info.AnyHost || len(info.GatewayAddresses) != 2 || info.GatewayAddresses[0] != a.String() || info.GatewayHTTPPort != port {
		t.Fatalf("GET /v1/edge: %+v", info)
	}
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "%s %s", r.Host, r.URL.Path) })

	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: a.String(), Owner: "c/a"})
	s := e.mustDial(t, tk.Key)
	bind(t, s, protocol.BindRequest{Protocol: "http"})
	serveHTTP(t, s, echo)
	addr := net.JoinHostPort(a.String(), strconv.Itoa(port))
	for _, host := range []string{"example.com", addr, "anything.example.org:8080"} {
		code, body := getAt(t, addr, host, "/x")
		if code != http.StatusOK || body != host+" /x" {
			t.Fatalf("Host %s on the Gateway address: %d %q", host, code, body)
		}
	}
	// The other address has no tunnel; the shared listener still routes
	// by Host, and an address there is no host of it.
	if code, _ := getAt(t, net.JoinHostPort(b.String(), strconv.Itoa(port)), "example.com", "/"); code != http.StatusNotFound {
		t.Fatalf("an address without a tunnel answers %d, want 404", code)
	}
	if code, _, _ := e.get(t, "example.com", "/", nil); code != http.StatusNotFound {
		t.Fatalf("the shared listener answers %d for a host nobody bound, want 404", code)
	}

	// A key without that address binds no Gateway address.
	other := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Owner: "c/b"})
	if _, err := e.mustDial(t, other.Key).Bind(context.Background(), protocol.BindRequest{Protocol: "http", Domain: b.String()}); err == nil {
		t.Fatal("a key issued for no address bound a Gateway address")
	}

	hk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "shop.example.net", Owner: "c/a"})
	hs := e.mustDial(t, hk.Key)
	bind(t, hs, protocol.BindRequest{Protocol: "http"})
	serveHTTP(t, hs, echo)
	if code, body, _ := e.get(t, "shop.example.net", "/y", nil); code != http.StatusOK || body != "shop.example.net /y" {
		t.Fatalf("an any-host name: %d %q", code, body)
	}
}

// getAt sends GET path with Host host to the listener at addr.
func getAt(t *testing.T, addr, host, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s (Host %s): %v", addr, host, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
