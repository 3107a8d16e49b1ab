package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/streamhub"
	"code.tuna.am/tuna/k8s-operator/edge/metrics"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
)

// tcpForwards reads tuna_edge_tcp_forwards_total{transport=transport}, 0
// before the first of its kind.
func tcpForwards(t *testing.T, e *testEdge, transport string) float64 {
	t.Helper()
	v, _ := counterValue(t, e, "tuna_edge_tcp_forwards_total", "transport", transport)
	return v
}

// dbKey reserves the TCP endpoint db and issues a tunnel key for it.
func dbKey(t *testing.T, e *testEdge) *apiwire.TunnelKey {
	t.Helper()
	if _, err := e.client(e.writeKey).CreateTCPEndpoint(context.Background(), apiwire.CreateTCPEndpoint{Alias: "db"}); err != nil {
		t.Fatal(err)
	}
	return e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "tcp", Address: "db"})
}

// echoTunnel serves every connection of s as an echo, reporting each
// connection's ForwardInfo.
func echoTunnel(s *tunnelclient.Session) <-chan protocol.ForwardInfo {
	infos := make(chan protocol.ForwardInfo, 16)
	go func() {
		for {
			c, err := s.Accept()
			if err != nil {
				return
			}
			infos <- c.Info()
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
				_ = c.CloseWrite()
			}()
		}
	}()
	return infos
}

// echoOnce sends msg through the endpoint, half-closes and checks that the
// same bytes come back before EOF.
func echoOnce(t *testing.T, addr string, msg []byte) net.Addr {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go func() {
		_, _ = conn.Write(msg)
		_ = conn.(*net.TCPConn).CloseWrite()
	}()
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := io.ReadAll(conn)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echo: %d bytes back of %d, err %v", len(got), len(msg), err)
	}
	return conn.LocalAddr()
}

func TestTCPConnectionsTravelOnStreams(t *testing.T) {
	e := startEdge(t, t.TempDir())
	s, reply, ep := tcpTunnel(t, e, "db", protocol.BindRequest{Alias: "db"})
	if len(reply.StreamCert) != 64 {
		t.Fatalf("bind reply names stream certificate %q, want a hex SHA-256", reply.StreamCert)
	}
	infos := echoTunnel(s)
	msg := bytes.Repeat([]byte("tuna!"), 400_000) // 2 MB, many TLS records, both ways at once
	local := echoOnce(t, ep.Address, msg)
	if info := <-infos; info.RemoteAddr != local.String() {
		t.Fatalf("the agent saw client %q, want %q", info.RemoteAddr, local)
	}
	echoOnce(t, ep.Address, []byte("second"))
	if got := tcpForwards(t, e, metrics.TransportStream); got != 2 {
		t.Fatalf("tcp forwards on streams = %v, want 2", got)
	}
	if got := tcpForwards(t, e, metrics.TransportChannel); got != 0 {
		t.Fatalf("tcp forwards on channels = %v, want 0", got)
	}
}

func TestTCPFallsBackToChannelsWhenTheAgentDialsNoStreams(t *testing.T) {
	e := startEdge(t, t.TempDir())
	tk := dbKey(t, e)
	info := e.info(t)
	s, err := tunnelclient.Dial(context.Background(), tunnelclient.Config{
		Addr: info.SSHAddr, Key: tk.Key, HostKey: info.SSHHostKey, NoStreams: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	reply := bind(t, s, protocol.BindRequest{Protocol: "tcp", Alias: "db"})
	echoTunnel(s)
	addr := reply.URL[len("tcp://"):]
	for range 3 {
		echoOnce(t, addr, []byte("over a channel"))
	}
	if got := tcpForwards(t, e, metrics.TransportChannel); got != 3 {
		t.Fatalf("tcp forwards on channels = %v, want 3", got)
	}
	if got := tcpForwards(t, e, metrics.TransportStream); got != 0 {
		t.Fatalf("tcp forwards on streams = %v, want 0", got)
	}
}

func TestEdgeWithoutStreamsSendsChannels(t *testing.T) {
	e := startEdge(t, t.TempDir(), func(c *server.Config) { c.NoStreams = true })
	s, reply, ep := tcpTunnel(t, e, "db", protocol.BindRequest{Alias: "db"})
	if reply.StreamCert != "" {
		t.Fatalf("an edge without streams named certificate %q", reply.StreamCert)
	}
	echoTunnel(s)
	echoOnce(t, ep.Address, []byte("over a channel"))
	if got := tcpForwards(t, e, metrics.TransportChannel); got != 1 {
		t.Fatalf("tcp forwards on channels = %v, want 1", got)
	}
}

// A revoked key takes its streams with it, as it does its channels: the
// public connection ends, though the stream is a TCP connection of its own.
func TestRevocationEndsStreams(t *testing.T) {
	e := startEdge(t, t.TempDir())
	tk := dbKey(t, e)
	s := e.mustDial(t, tk.Key)
	reply := bind(t, s, protocol.BindRequest{Protocol: "tcp", Alias: "db"})
	echoTunnel(s)
	conn, err := net.Dial("tcp", reply.URL[len("tcp://"):])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(conn, buf); err != nil {
		t.Fatalf("echo before revocation: %v", err)
	}
	if got := tcpForwards(t, e, metrics.TransportStream); got != 1 {
		t.Fatalf("tcp forwards on streams = %v, want 1", got)
	}
	if err := e.client(e.writeKey).RevokeTunnelKey(context.Background(), tk.ID); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := conn.Read(buf)
	if err == nil {
		t.Fatalf("the public connection still carried %q after the key was revoked", buf[:n])
	}
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the public connection stayed open after the key was revoked")
	}
}

// Nobody reaches a tunnel through the stream port without a token the edge
// gave out: a TLS client with a made-up token is closed, and sends nothing
// to any agent.
func TestStreamWithUnknownTokenIsClosed(t *testing.T) {
	e := startEdge(t, t.TempDir())
	s, _, _ := tcpTunnel(t, e, "db", protocol.BindRequest{Alias: "db"})
	infos := echoTunnel(s)
	c, err := tls.Dial("tcp", e.info(t).SSHAddr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the attacker's client
	if err != nil {
		t.Fatalf("the SSH port should speak TLS to a stream client: %v", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(streamhub.NewToken())); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil || n > 0 {
		t.Fatalf("a made-up token got %d bytes, err %v; want the connection closed", n, err)
	}
	select {
	case info := <-infos:
		t.Fatalf("the agent received a connection from %s", info.RemoteAddr)
	default:
	}
}

// An agent from before streams answers no stream request: the first
// connection waits for its stream, then goes on a channel; later ones go
// on channels at once.
func TestAgentWithoutStreamsIsServedOnChannels(t *testing.T) {
	e := startEdge(t, t.TempDir())
	tk := dbKey(t, e)
	info := e.info(t)
	pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(info.SSHHostKey))
	if err != nil {
		t.Fatal(err)
	}
	// A raw SSH agent: it binds, declines every global request it does not
	// know (as x/crypto/ssh does for want-reply ones, and ignores the rest)
	// and echoes on the channels it is given.
	conn, chans, reqs, err := ssh.NewClientConn(mustDialTCP(t, info.SSHAddr), info.SSHAddr, &ssh.ClientConfig{
		User: protocol.SSHUser, Auth: []ssh.AuthMethod{ssh.Password(tk.Key)}, HostKeyCallback: ssh.FixedHostKey(pk),
	})
	if err != nil {
		t.Fatal(err)
	}
	sc := ssh.NewClient(conn, nil, nil)
	defer sc.Close()
	var streamAsks atomic.Int32
	go func() {
		for r := range reqs {
			if r.Type == protocol.StreamRequestType {
				streamAsks.Add(1)
			}
			if r.WantReply {
				_ = r.Reply(false, nil)
			}
		}
	}()
	go func() {
		for nc := range chans {
			ch, creqs, err := nc.Accept()
			if err != nil {
				continue
			}
			go ssh.DiscardRequests(creqs)
			go func() {
				_, _ = io.Copy(ch, ch)
				_ = ch.CloseWrite()
			}()
		}
	}()
	ok, payload, err := conn.SendRequest(protocol.BindRequestType, true,
		protocol.Marshal(protocol.BindRequest{Protocol: "tcp", Alias: "db"}))
	if err != nil || !ok {
		t.Fatalf("bind: %v %s", err, payload)
	}
	var reply protocol.BindReply
	if err := json.Unmarshal(payload, &reply); err != nil {
		t.Fatal(err)
	}
	addr := reply.URL[len("tcp://"):]
	echoOnce(t, addr, []byte("first, after the stream wait"))
	echoOnce(t, addr, []byte("second, on a channel at once"))
	if got := tcpForwards(t, e, metrics.TransportChannel); got != 2 {
		t.Fatalf("tcp forwards on channels = %v, want 2", got)
	}
	if got := tcpForwards(t, e, metrics.TransportStream); got != 0 {
		t.Fatalf("tcp forwards on streams = %v, want 0", got)
	}
	// The edge asked once and gave up on streams for this session.
	if n := streamAsks.Load(); n != 1 {
		t.Fatalf("the edge asked for %d streams, want 1", n)
	}
}
