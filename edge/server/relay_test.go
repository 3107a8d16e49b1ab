package server_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/tests/rawhttp"
)

// The public HTTP listener relays a plain request's head as the client
// wrote it, less the hop-by-hop fields and with the edge's forwarding
// headers, in one head on the tunnel channel; with --no-http-relay,
// net/http re-serialises it (field names re-cased). The HTTPS listener
// does the same behind TLS for a connection that negotiates http/1.1 and
// for one that offers no ALPN at all, with X-Forwarded-Proto: https.
func TestRelayWritesTheHeadAsSent(t *testing.T) {
	certFile, keyFile, pool := writeWildcardCert(t, t.TempDir())
	for _, noRelay := range []bool{false, true} {
		e := startEdge(t, t.TempDir(), func(c *server.Config) {
			c.NoHTTPRelay = noRelay
			c.HTTPSListen = "127.0.0.1:0"
			c.TLSCertFile, c.TLSKeyFile = certFile, keyFile
		})
		tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "raw"})
		s := e.mustDial(t, tk.Key)
		bind(t, s, protocol.BindRequest{Protocol: "http", Subdomain: "raw"})
		for _, l := range []struct {
			name  string
			alpn  []string // nil: plain HTTP
			proto string
		}{{"http", nil, "http"}, {"https, ALPN http/1.1", []string{"http/1.1"}, "https"}, {"https, no ALPN", []string{}, "https"}} {
			t.Run(fmt.Sprintf("NoHTTPRelay=%v/%s", noRelay, l.name), func(t *testing.T) {
				heads := make(chan string, 1)
				go func() {
					ch, err := s.Accept()
					if err != nil {
						return
					}
					defer func() { _ = ch.Close() }()
					head, err := rawhttp.ReadHead(bufio.NewReader(ch))
					if err != nil {
						return
					}
					heads <- head
					_, _ = io.WriteString(ch, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}()

				var c net.Conn
				var err error
				if l.alpn == nil {
					c, err = net.Dial("tcp", e.HTTPAddr())
				} else {
					var tc *tls.Conn
					tc, err = tls.Dial("tcp", e.HTTPSAddr(), &tls.Config{RootCAs: pool, ServerName: "raw." + baseDomain, NextProtos: l.alpn})
					if err == nil && tc.ConnectionState().NegotiatedProtocol != strings.Join(l.alpn, "") {
						t.Fatalf("negotiated %q offering %q", tc.ConnectionState().NegotiatedProtocol, l.alpn)
					}
					c = tc
				}
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = c.Close() }()
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				fmt.Fprintf(c, "GET /p?q=1 HTTP/1.1\r\nHost: raw.%s\r\nx-lower: 1\r\nConnection: keep-alive, x-hop\r\nx-hop: 2\r\nForwarded: for=192.0.2.1\r\nX-Forwarded-Proto: gopher\r\n\r\n", baseDomain)
				res, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = res.Body.Close() }()
				if body, _ := io.ReadAll(res.Body); res.StatusCode != 200 || string(body) != "ok" {
					t.Fatalf("answer %d %q", res.StatusCode, body)
				}
				head := <-heads
				if !strings.HasPrefix(head, "GET /p?q=1 HTTP/1.1\r\n") || strings.Contains(head, "x-hop") ||
					strings.Contains(head, "192.0.2.1") || strings.Contains(head, "gopher") || !strings.Contains(head, "X-Forwarded-For: 127.0.0.1\r\n") ||
					!strings.Contains(head, "X-Forwarded-Proto: "+l.proto+"\r\n") {
					t.Fatalf("the channel got:\n%s", head)
				}
				if asSent := strings.Contains(head, "\r\nx-lower: 1\r\n"); asSent == noRelay {
					t.Fatalf("field as sent: %v with NoHTTPRelay %v:\n%s", asSent, noRelay, head)
				}
			})
		}
	}
}
