package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

// A public connection keeps one channel per host for its plain requests,
// and a client that names another host on the same connection never gets
// the first host's channel: each request reaches the tunnel of its own
// Host.
func TestPinnedChannelsNeverCrossHosts(t *testing.T) {
	e := startEdge(t, t.TempDir())
	channels := map[string]*atomic.Int64{}
	for _, name := range []string{"alpha", "beta"} {
		tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: name})
		s := e.mustDial(t, tk.Key)
		bind(t, s, protocol.BindRequest{Protocol: "http", Subdomain: name})
		n := &atomic.Int64{}
		channels[name] = n
		srv := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, name) }),
			ConnState: func(_ net.Conn, st http.ConnState) {
				if st == http.StateNew {
					n.Add(1)
				}
			},
		}
		go func() { _ = srv.Serve(s.Listener()) }()
		t.Cleanup(func() { _ = srv.Close() })
	}

	c, err := net.Dial("tcp", e.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	for i, name := range []string{"alpha", "beta", "alpha", "beta", "alpha", "alpha", "beta"} {
		fmt.Fprintf(c, "GET /%d HTTP/1.1\r\nHost: %s.%s\r\n\r\n", i, name, baseDomain)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d for %s: %v", i, name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != name {
			t.Fatalf("request %d for %s: %d %q: answered by another tunnel", i, name, resp.StatusCode, body)
		}
	}
	if a, b := channels["alpha"].Load(), channels["beta"].Load(); a != 1 || b != 1 {
		t.Fatalf("channels opened: alpha %d, beta %d; want one each, kept for the connection", a, b)
	}
}
