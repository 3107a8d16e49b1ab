package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
)

// tcpTunnel reserves alias, connects a tcp tunnel key and binds it.
func tcpTunnel(t *testing.T, e *testEdge, alias string, req protocol.BindRequest) (*tunnelclient.Session, protocol.BindReply, *apiwire.TCPEndpoint) {
	t.Helper()
	ep, err := e.client(e.writeKey).CreateTCPEndpoint(context.Background(), apiwire.CreateTCPEndpoint{Alias: alias})
	if err != nil {
		t.Fatal(err)
	}
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "tcp", Address: alias})
	s := e.mustDial(t, tk.Key)
	req.Protocol = "tcp"
	return s, bind(t, s, req), ep
}

func TestTCPTunnelEcho(t *testing.T) {
	e := startEdge(t, t.TempDir())
	s, reply, ep := tcpTunnel(t, e, "db", protocol.BindRequest{Alias: "db"})
	if want := "tcp://127.0.0.1:" + strconv.Itoa(ep.Port); reply.URL != want {
		t.Fatalf("URL = %q, want %q", reply.URL, want)
	}
	go func() {
		for {
			c, err := s.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c) // echo until the client half-closes
			}()
		}
	}()
	conn, err := net.Dial("tcp", ep.Address)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msg := bytes.Repeat([]byte("tuna!"), 100_000) // larger than one SSH window
	go func() {
		_, _ = conn.Write(msg)
		_ = conn.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(conn)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echo: %d bytes back of %d, err %v", len(got), len(msg), err)
	}
}

// acceptOne returns the first forwarded connection's first bytes.
func acceptHeader(t *testing.T, s *tunnelclient.Session, n int) ([]byte, protocol.ForwardInfo) {
	t.Helper()
	type res struct {
		b    []byte
		info protocol.ForwardInfo
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := s.Accept()
		if err != nil {
			ch <- res{err: err}
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		var b []byte
		if n < 0 { // v1: a line
			b, err = br.ReadBytes('\n')
		} else {
			b = make([]byte, n)
			_, err = io.ReadFull(br, b)
		}
		ch <- res{b, c.Info(), err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.b, r.info
	case <-time.After(10 * time.Second):
		t.Fatal("no forwarded connection")
		return nil, protocol.ForwardInfo{}
	}
}

func TestTCPProxyProtocol(t *testing.T) {
	e := startEdge(t, t.TempDir())
	for _, v := range []string{"v1", "v2"} {
		t.Run(v, func(t *testing.T) {
			s, _, ep := tcpTunnel(t, e, "pp"+v, protocol.BindRequest{Alias: "pp" + v, ProxyProtocol: v})
			conn, err := net.Dial("tcp", ep.Address)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			src := netip.MustParseAddrPort(conn.LocalAddr().String())
			dst := netip.MustParseAddrPort(conn.RemoteAddr().String())
			n := -1
			if v == "v2" {
				n = 16 + 12
			}
			hdr, info := acceptHeader(t, s, n)
			if info.RemoteAddr != src.String() {
				t.Errorf("ForwardInfo.RemoteAddr = %q, want %q", info.RemoteAddr, src)
			}
			if v == "v1" {
				want := "PROXY TCP4 " + src.Addr().String() + " " + dst.Addr().String() + " " +
					strconv.Itoa(int(src.Port())) + " " + strconv.Itoa(int(dst.Port())) + "\r\n"
				if string(hdr) != want {
					t.Fatalf("v1 header %q, want %q", hdr, want)
				}
				return
			}
			if !bytes.HasPrefix(hdr, []byte("\r\n\r\n\x00\r\nQUIT\n")) || hdr[12] != 0x21 || hdr[13] != 0x11 {
				t.Fatalf("v2 header %x", hdr)
			}
			s4, d4 := src.Addr().As4(), dst.Addr().As4()
			if !bytes.Equal(hdr[16:20], s4[:]) || !bytes.Equal(hdr[20:24], d4[:]) ||
				binary.BigEndian.Uint16(hdr[24:]) != src.Port() || binary.BigEndian.Uint16(hdr[26:]) != dst.Port() {
				t.Fatalf("v2 addresses %x, want %v -> %v", hdr[16:], src, dst)
			}
		})
	}
}

func TestCIDRDenyTCP(t *testing.T) {
	e := startEdge(t, t.TempDir())
	s, _, ep := tcpTunnel(t, e, "guarded", protocol.BindRequest{Alias: "guarded", DenyCIDRs: []string{"127.0.0.0/8"}})
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := s.Accept(); err == nil {
			accepted <- struct{}{}
			_ = c.Close()
		}
	}()
	conn, err := net.Dial("tcp", ep.Address)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := conn.Read(make([]byte, 1))
	if n != 0 || err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("denied client read %d, %v; want the edge to close the connection", n, err)
	}
	select {
	case <-accepted:
		t.Fatal("denied client reached the agent")
	default:
	}
}

func TestTCPBindRefusals(t *testing.T) {
	e := startEdge(t, t.TempDir())
	connectKey, _ := e.CreateAPIKey("c", []string{apiwire.ScopeConnect})
	s := e.mustDial(t, connectKey)
	ep, err := e.client(e.writeKey).CreateTCPEndpoint(context.Background(), apiwire.CreateTCPEndpoint{Alias: "byport"})
	if err != nil {
		t.Fatal(err)
	}
	// A reserved port may be named by number.
	if r := bind(t, s, protocol.BindRequest{Protocol: "tcp", Alias: strconv.Itoa(ep.Port)}); !strings.HasSuffix(r.URL, ":"+strconv.Itoa(ep.Port)) {
		t.Fatalf("URL = %q", r.URL)
	}
	for _, alias := range []string{"missing", strconv.Itoa(e.cfg.TCPPortRange[1]), "1"} {
		_, err := s.Bind(context.Background(), protocol.BindRequest{Protocol: "tcp", Alias: alias})
		var be *tunnelclient.BindError
		if !errors.As(err, &be) || be.Code != protocol.CodeAddressNotFound {
			t.Errorf("bind %q: %v, want address_not_found", alias, err)
		}
	}
}
