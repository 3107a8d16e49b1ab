package sshd

import (
	"context"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/internal/proxyproto"
	"code.tuna.am/tuna/k8s-operator/edge/internal/registry"
	"code.tuna.am/tuna/k8s-operator/edge/metrics"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

// openTimeout bounds how long a public client waits for the agent to accept
// its channel.
const openTimeout = 30 * time.Second

// accessAllows applies the access policy of a TCP address: its ip rules;
// a policy with other rules, or one not in force, refuses every client.
func (s *Server) accessAllows(pool *registry.Pool, remote string) bool {
	id := pool.AccessPolicy()
	return id == "" || (s.cfg.Access != nil && s.cfg.Access.TCPAllowed(id, remote))
}

// serveTCP carries one public TCP connection of an endpoint that pool
// serves, through the pool's least loaded session that is not draining. A
// session that fails to open the channel (it just died) is skipped and the
// next one tried, so a dead agent costs the client nothing but a retry.
func (s *Server) serveTCP(c net.Conn, pool *registry.Pool) {
	remote := c.RemoteAddr().String()
	if !pool.ACL().AllowedAddr(remote) || !s.accessAllows(pool, remote) {
		// Closing without a byte is all TCP can say; the agent never sees
		// a denied client.
		s.log.Debug("tcp client denied by CIDR rules", "pool", pool.ID())
		_ = c.Close()
		return
	}
	if limit := s.cfg.Limits.ConnectionsPerTunnel; !pool.Conns.Take(limit) {
		s.m.LimitRefused(metrics.LimitConnectionsPerTunnel)
		s.log.Info("tcp client refused", "pool", pool.ID(), "err", &registry.LimitError{
			Limit: metrics.LimitConnectionsPerTunnel, Value: limit, What: "the TCP endpoint has too many open connections"})
		_ = c.Close()
		return
	}
	s.m.InFlight(1)
	defer func() {
		pool.Conns.Put()
		s.m.InFlight(-1)
	}()
	s.m.PublicConnection(protocol.ProtocolTCP)
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	ch, err := pool.Open(ctx, protocol.ForwardInfo{RemoteAddr: remote})
	cancel()
	if err != nil {
		s.log.Info("tcp forward failed", "pool", pool.ID(), "err", err)
		_ = c.Close()
		return
	}
	if pp := pool.ProxyProtocol(); pp != "" {
		src, _ := netip.ParseAddrPort(remote)
		dst, _ := netip.ParseAddrPort(c.LocalAddr().String())
		hdr, err := proxyproto.Header(pp, src, dst)
		if err == nil {
			_, err = ch.Write(hdr)
		}
		if err != nil {
			_ = c.Close()
			_ = ch.Close()
			return
		}
	}
	Pipe(c, ch, s.m)
}

type closeWriter interface{ CloseWrite() error }

// Pipe copies both ways between a public connection and a tunnel channel,
// passing half-closes through so request/response protocols that shut down
// their write side still see the reply. It returns when both ways are done.
func Pipe(public, tunnel net.Conn, m *metrics.Metrics) {
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn, dir string) {
		defer wg.Done()
		n, _ := io.Copy(dst, src)
		m.Bytes(dir, int(n))
		if cw, ok := dst.(closeWriter); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	go cp(tunnel, public, "in")
	go cp(public, tunnel, "out")
	wg.Wait()
	_ = public.Close()
	_ = tunnel.Close()
}
