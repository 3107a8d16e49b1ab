package session

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/proxy"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// pipeGreeting is how much the backend sends, unasked, right after it
// switches protocols.
const pipeGreeting = 256 << 10

// pipeBackend switches every request that asks for it to a raw byte
// stream: it sends greeting, then echoes what it reads, byte for byte.
func pipeBackend(t *testing.T, greeting []byte) string {
	t.Helper()
	return serveBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer func() { _ = c.Close() }()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		_, _ = brw.Write(greeting)
		if brw.Flush() != nil {
			return
		}
		_, _ = io.Copy(c, brw.Reader)
	}))
}

// After an upgrade (WebSocket), the edge and the agent carry the
// connection as bytes, each way: what the backend sends unasked and what
// the client sends come out unchanged, in order, whatever they are (an
// HTTP request, bytes no WebSocket frame would start with, writes of one
// byte and of a megabyte), on the HTTP and the HTTPS listener. Nothing
// on the way parses or re-frames the messages, so a message costs each
// hop its copy and nothing more; and a one-byte write crosses alone,
// each awaited before the next, so nothing waits for a buffer to fill.
func TestUpgradedConnectionIsABytePipe(t *testing.T) {
	h := startH2Edge(t, func(c *server.Config) { c.HTTPListen = ports.Addr(t) })
	greeting := make([]byte, pipeGreeting)
	_, _ = rand.Read(greeting)
	host, _ := h.publish(t, "pipe", proxy.Upstream{Scheme: "http", Addr: pipeBackend(t, greeting), Display: "pipe"}, FramesAuto)

	big := make([]byte, 1<<20)
	_, _ = rand.Read(big)
	writes := [][]byte{
		[]byte("GET /smuggled HTTP/1.1\r\nHost: admin.internal\r\n\r\n"),
		{0xff, 0x7f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01}, // a WebSocket frame header claiming 2^63 bytes
		{0x00},
		big,
		[]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
	}
	for _, l := range []struct {
		name string
		dial func() (net.Conn, error)
	}{
		{"http", func() (net.Conn, error) { return net.Dial("tcp", h.e.HTTPAddr()) }},
		{"https", func() (net.Conn, error) {
			return tls.Dial("tcp", h.e.HTTPSAddr(), &tls.Config{RootCAs: h.pool, ServerName: host, NextProtos: []string{"http/1.1"}})
		}},
	} {
		t.Run(l.name, func(t *testing.T) {
			c, err := l.dial()
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			_ = c.SetDeadline(time.Now().Add(60 * time.Second))
			if _, err := io.WriteString(c, "GET /pipe HTTP/1.1\r\nHost: "+host+"\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
				"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dHVuYS1waXBlLXRlc3QxMg==\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			_ = res.Body.Close()
			if res.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("the upgrade was answered %s", res.Status)
			}
			expect := func(what string, want []byte) {
				t.Helper()
				got := make([]byte, len(want))
				if _, err := io.ReadFull(br, got); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if !bytes.Equal(got, want) {
					i := 0
					for i < len(got) && got[i] == want[i] {
						i++
					}
					t.Fatalf("%s: %d bytes differ from byte %d on", what, len(want)-i, i)
				}
			}
			expect("the backend's greeting", greeting)
			for _, w := range writes {
				go func() { _, _ = c.Write(w) }()
				expect("an echo of "+string(w[:min(len(w), 16)]), w)
			}
			for i := range 200 {
				b := []byte{byte(i)}
				if _, err := c.Write(b); err != nil {
					t.Fatal(err)
				}
				expect("a one-byte write", b)
			}
		})
	}
}
