package server_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
)

// A client's copies of the identity fields never reach a backend, on a
// host without an access policy too, whichever path the edge takes: the
// h1 relay (a plain HTTP/1.1 request), net/http (HTTP/1.0, or the relay
// turned off) and an upgrade through the reverse proxy.
func TestClientIdentityFieldsAreDroppedOnEveryPath(t *testing.T) {
	spoof := "X-Tuna-User: admin\r\nx-tuna-email: admin@example.com\r\nX-TUNA-GROUPS: admins\r\nX-Tuna-Assertion: e30.e30.\r\n"
	for _, tc := range []struct {
		name    string
		noRelay bool
		request string
	}{
		{"relay", false, "GET / HTTP/1.1\r\nHost: %s\r\n" + spoof + "\r\n"},
		{"net/http after the relay", false, "GET / HTTP/1.0\r\nHost: %s\r\n" + spoof + "\r\n"},
		{"net/http without the relay", true, "GET / HTTP/1.1\r\nHost: %s\r\n" + spoof + "\r\n"},
		{"upgrade", false, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" + spoof + "\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startEdge(t, t.TempDir(), func(c *server.Config) { c.NoHTTPRelay = tc.noRelay })
			tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "who"})
			s := e.mustDial(t, tk.Key)
			bind(t, s, protocol.BindRequest{Protocol: "http", Subdomain: "who"})
			serveHTTP(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var seen []string
				for name := range r.Header {
					if strings.HasPrefix(strings.ToLower(name), "x-tuna-") {
						seen = append(seen, name)
					}
				}
				w.Header().Set("Connection", "close")
				fmt.Fprintf(w, "seen=%s", strings.Join(seen, ","))
			}))
			c, err := net.Dial("tcp", e.HTTPAddr())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			fmt.Fprintf(c, tc.request, "who."+baseDomain)
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = res.Body.Close() }()
			body := make([]byte, 256)
			n, _ := res.Body.Read(body)
			if res.StatusCode != http.StatusOK || string(body[:n]) != "seen=" {
				t.Fatalf("the backend got a client's identity field: %d %q", res.StatusCode, body[:n])
			}
		})
	}
}
