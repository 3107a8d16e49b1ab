package sshd

import (
	"context"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/acl"
	"code.tuna.am/tuna/k8s-operator/edge/metrics"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/proxyproto"
	"code.tuna.am/tuna/k8s-operator/edge/registry"
)

// openTimeout bounds how long a public client waits for the agent to accept
// its channel.
const openTimeout = 30 * time.Second

// forwardTCP carries one public TCP connection of an endpoint whose open
// connections conns counts.
func (ss *session) forwardTCP(c net.Conn, list *acl.List, pp string, conns *registry.Slots) {
	remote := c.RemoteAddr().String()
	if !list.AllowedAddr(remote) {
		// Closing without a byte is all TCP can say; the agent never sees
		// a denied client.
		ss.srv.log.Debug("tcp client denied by CIDR rules", "session", ss.id)
		_ = c.Close()
		return
	}
	if limit := ss.srv.cfg.Limits.ConnectionsPerTunnel; !conns.Take(limit) {
		ss.srv.m.LimitRefused(metrics.LimitConnectionsPerTunnel)
		ss.srv.log.Info("tcp client refused", "session", ss.id, "err", &registry.LimitError{
			Limit: metrics.LimitConnectionsPerTunnel, Value: limit, What: "the TCP endpoint has too many open connections"})
		_ = c.Close()
		return
	}
	defer conns.Put()
	ss.srv.m.PublicConnection(protocol.ProtocolTCP)
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	ch, err := ss.OpenForward(ctx, protocol.ForwardInfo{RemoteAddr: remote})
	cancel()
	if err != nil {
		ss.srv.log.Info("tcp forward failed", "session", ss.id, "err", err)
		_ = c.Close()
		return
	}
	if pp != "" {
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
	Pipe(c, ch, ss.srv.m)
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
