package tunnelclient

import (
	"io"
	"net"
	"sync"

	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/internal/connio"
)

// Listener adapts Accept to net.Listener, so an http.Server can serve the
// tunnel. Closing it stops Accept, not the session.
func (s *Session) Listener() net.Listener {
	return &listener{s: s, closed: make(chan struct{})}
}

// Conn is one public connection, on an SSH channel or a stream.
type Conn struct {
	net.Conn
	info protocol.ForwardInfo
	// stream is set on a stream connection, which the session closes
	// when it ends.
	stream *Session
	// owner counts the connection open until its first Close.
	owner *Session
	once  sync.Once
}

// Info describes the public connection (client address, host, scheme).
func (c *Conn) Info() protocol.ForwardInfo { return c.info }

// DirectReader is the channel's (chanconn.Conn.DirectReader), for the
// agent's h1 relay; a stream has none.
func (c *Conn) DirectReader() (io.Reader, bool) { return connio.DirectReaderOf(c.Conn) }

type listener struct {
	s      *Session
	once   sync.Once
	closed chan struct{}
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.s.accept(l.closed)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (l *listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *listener) Addr() net.Addr { return l.s.conn.LocalAddr() }

func remoteAddr(s string) net.Addr {
	ra, err := net.ResolveTCPAddr("tcp", s)
	if err != nil {
		return &net.TCPAddr{}
	}
	return ra
}
