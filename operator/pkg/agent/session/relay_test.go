package session

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/proxy"
	"code.tuna.am/tuna/k8s-operator/tests/rawhttp"
)

// headBackend answers every request on a keep-alive connection with "ok"
// and sends each request head it got, as it got it, on heads.
func headBackend(t *testing.T) (string, <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	heads := make(chan string, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				br := bufio.NewReader(c)
				for {
					head, err := rawhttp.ReadHead(br)
					if err != nil {
						return
					}
					heads <- head
					if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), heads
}

type recordingMeter struct {
	mu   sync.Mutex
	seen []string
}

func (m *recordingMeter) Request(code int, _ time.Duration, in, out int64) {
	m.mu.Lock()
	m.seen = append(m.seen, fmt.Sprintf("%d %d %d", code, in, out))
	m.mu.Unlock()
}

func (m *recordingMeter) Bytes(int64, int64) {}

func (m *recordingMeter) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.seen...)
}

// An http Tunnel's plain requests are relayed at the edge and at the
// agent (package h1): the backend gets the client's fields as the client
// wrote them, which net/http would have re-cased, with the edge's
// forwarding headers in place of the client's; the agent still counts each
// request. With NoRelay the same request goes through net/http.
func TestHTTPTunnelRelaysPlainRequests(t *testing.T) {
	for _, noRelay := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoRelay=%v", noRelay), func(t *testing.T) {
			label := "relayed"
			if noRelay {
				label = "parsed"
			}
			e, cfg := startEdge(t, label)
			addr, heads := headBackend(t)
			meter := &recordingMeter{}
			h := proxy.NewHTTP(proxy.Upstream{Scheme: "http", Addr: addr, Display: "backend"}, meter)
			tun := Start(cfg, Traffic{Handler: h, NoRelay: noRelay}, DefaultBackoff, Hooks{}, logr.Discard(), nil)
			defer tun.Stop()
			waitConnected(t, tun)

			c, err := net.Dial("tcp", e.HTTPAddr())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			br := bufio.NewReader(c)
			host := label + ".tuna.localhost"
			for i := range 2 {
				fmt.Fprintf(c, "GET /%d HTTP/1.1\r\nHost: %s\r\nx-lower-case: 1\r\nX-Forwarded-For: 192.0.2.66\r\n\r\n", i, host)
				res, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = res.Body.Close() }()
				body, _ := io.ReadAll(res.Body)
				if res.StatusCode != 200 || string(body) != "ok" {
					t.Fatalf("request %d: %d %q", i, res.StatusCode, body)
				}
			}
			head := <-heads
			if strings.Contains(head, "192.0.2.66") || !strings.Contains(head, "X-Forwarded-For: 127.0.0.1\r\n") ||
				!strings.Contains(head, "X-Forwarded-Host: "+host+"\r\n") {
				t.Fatalf("the backend got the client's forwarding header, or not the edge's:\n%s", head)
			}
			asSent := strings.Contains(head, "\r\nx-lower-case: 1\r\n")
			if asSent == noRelay {
				t.Fatalf("field as the client sent it: %v, want %v (relayed at both ends: %v):\n%s", asSent, !noRelay, !noRelay, head)
			}
			// The agent counts a request once its answer is out.
			for deadline := time.Now().Add(10 * time.Second); len(meter.requests()) < 2 && time.Now().Before(deadline); {
				time.Sleep(2 * time.Millisecond)
			}
			if got := meter.requests(); len(got) != 2 || got[0] != "200 0 2" {
				t.Fatalf("the agent counted %v, want two requests of 200 with 2 bytes out", got)
			}
		})
	}
}
