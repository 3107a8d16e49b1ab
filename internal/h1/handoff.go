package h1

import (
	"bufio"
	"net"
	"sync"
)

// handoff is the listener the fallback http.Server serves: Accept returns
// the connections the relay gave up, with what it had read but not
// consumed still in front of them.
type handoff struct {
	addr net.Addr
	ch   chan net.Conn

	mu     sync.Mutex
	closed bool
	done   chan struct{}
}

func newHandoff(addr net.Addr) *handoff {
	return &handoff{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

// give passes c, read through r, to the fallback server; a closed handoff
// closes it. With r nil (nothing read yet) c goes as it is, so that
// net/http sees a *tls.Conn as one.
func (l *handoff) give(c net.Conn, r *bufio.Reader) {
	hc := c
	if r != nil {
		hc = &handedConn{Conn: c, r: r}
	}
	select {
	case l.ch <- hc:
	case <-l.done:
		_ = c.Close()
	}
}

func (l *handoff) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoff) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.done)
	}
	return nil
}

func (l *handoff) Addr() net.Addr { return l.addr }

// handedConn gives net/http what the relay's reader holds (the head it
// peeked at, and anything after it) first, then reads the connection
// itself, with its deadlines, which net/http relies on.
type handedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *handedConn) Read(p []byte) (int, error) {
	if c.r != nil {
		if c.r.Buffered() > 0 {
			return c.r.Read(p)
		}
		c.r = nil
	}
	return c.Conn.Read(p)
}
