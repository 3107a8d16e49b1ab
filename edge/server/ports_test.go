package server_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
)

func portAddr(p int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)) }

// listenForeign holds port p as another process on the edge's host would.
func listenForeign(t *testing.T, p int) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", portAddr(p))
	if err != nil {
		t.Fatalf("foreign listener on %d: %v", p, err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

// serveEcho serves every forwarded connection of s as an echo.
func serveEcho(s *tunnelclient.Session) {
	go func() {
		for {
			c, err := s.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
}

// roundTrip sends msg to addr and reads it back.
func roundTrip(t *testing.T, addr, msg string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != msg {
		t.Fatalf("echo through %s: %q, %v", addr, got, err)
	}
}

func TestTCPEndpointIsReservedAroundAForeignListener(t *testing.T) {
	e := startEdge(t, t.TempDir())
	first := e.cfg.TCPPortRange[0]
	foreign := listenForeign(t, first)

	s, reply, ep := tcpTunnel(t, e, "db", protocol.BindRequest{Alias: "db"})
	if ep.Port != first+1 {
		t.Fatalf("endpoint got port %d; want %d, the next after the foreign listener's", ep.Port, first+1)
	}
	if !strings.HasSuffix(reply.URL, ":"+strconv.Itoa(first+1)) {
		t.Fatalf("URL = %q", reply.URL)
	}
	serveEcho(s)
	roundTrip(t, ep.Address, "through the tunnel")

	// The foreign process still has its port.
	go func() {
		if c, err := foreign.Accept(); err == nil {
			_, _ = io.WriteString(c, "foreign")
			_ = c.Close()
		}
	}()
	c, err := net.Dial("tcp", portAddr(first))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if b, _ := io.ReadAll(c); string(b) != "foreign" {
		t.Fatalf("port %d answered %q; want the foreign listener", first, b)
	}
}

func TestReservedPortStaysWithTheEdgeBetweenSessions(t *testing.T) {
	e := startEdge(t, t.TempDir())
	s, _, ep := tcpTunnel(t, e, "db", protocol.BindRequest{Alias: "db"})
	_ = s.Close()
	waitFor(t, "session to end", func() bool { return len(e.ActiveSessions()) == 0 })

	if ln, err := net.Listen("tcp", ep.Address); err == nil {
		_ = ln.Close()
		t.Fatalf("another process could take port %d between sessions", ep.Port)
	}
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "tcp", Address: "db"})
	s2 := e.mustDial(t, tk.Key)
	bind(t, s2, protocol.BindRequest{Protocol: "tcp"})
	serveEcho(s2)
	roundTrip(t, ep.Address, "second session")
}

func TestDeletingTCPEndpointEndsItsSessionAndClosesItsPort(t *testing.T) {
	e := startEdge(t, t.TempDir())
	s, _, ep := tcpTunnel(t, e, "db", protocol.BindRequest{Alias: "db"})
	serveEcho(s)
	roundTrip(t, ep.Address, "before")
	if err := e.client(e.writeKey).DeleteTCPEndpoint(context.Background(), "db", ""); err != nil {
		t.Fatal(err)
	}
	te := asTerminated(waitDone(t, s))
	if te == nil || te.Code != protocol.CodeAddressNotFound || !strings.Contains(te.Reason, "deleted") {
		t.Fatalf("session ended with %v; want address_not_found saying the endpoint was deleted", s.Err())
	}
	if c, err := net.Dial("tcp", ep.Address); err == nil {
		_ = c.Close()
		t.Fatalf("port %d of a deleted endpoint still accepts connections", ep.Port)
	}
}

func TestReservedPortTakenWhileTheEdgeWasDown(t *testing.T) {
	dir := t.TempDir()
	e1 := startEdge(t, dir)
	ep, err := e1.client(e1.writeKey).CreateTCPEndpoint(context.Background(), apiwire.CreateTCPEndpoint{Alias: "db"})
	if err != nil {
		t.Fatal(err)
	}
	r := e1.cfg.TCPPortRange
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}
	foreign := listenForeign(t, ep.Port)

	e2 := startEdge(t, dir, func(c *server.Config) { c.TCPPortRange = r })
	tk := e2.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "tcp", Address: "db"})
	s := e2.mustDial(t, tk.Key)
	_, err = s.Bind(context.Background(), protocol.BindRequest{Protocol: "tcp"})
	var be *tunnelclient.BindError
	if !errors.As(err, &be) || be.Code != protocol.CodeAddressTaken || !strings.Contains(be.Message, "another process") {
		t.Fatalf("bind while another process holds the port: %v; want address_taken naming the cause", err)
	}
	// The reservation keeps its port: stable addresses matter more than
	// moving the endpoint somewhere free.
	if got, err := e2.client(e2.writeKey).GetTCPEndpoint(context.Background(), "db"); err != nil || got.Port != ep.Port {
		t.Fatalf("endpoint after the refusal: %+v %v", got, err)
	}
	_ = foreign.Close()
	bind(t, s, protocol.BindRequest{Protocol: "tcp"})
	serveEcho(s)
	roundTrip(t, ep.Address, "port is back")
}
