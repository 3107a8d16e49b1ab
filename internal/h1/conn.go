package h1

import (
	"bufio"
	"errors"
	"io"
	"net"
	"time"
)

// conn is one client connection and the upstream connections pinned to
// it: requests of one HTTP/1.1 connection come one after another, so one
// upstream connection per Key serves them all. A client that names
// another host on the same connection gets that host's own, never the
// first one's.
type conn struct {
	s      *Server
	nc     net.Conn
	remote string
	br     *bufio.Reader
	bw     *bufio.Writer
	// direct is set when br reads nc's DirectReader, which no deadline
	// interrupts.
	direct io.Reader
	// linger: the connection ends with a request body unread in it.
	linger bool
	// ups are the pinned upstream connections, at most maxPinned; up is
	// the one of the exchange in progress.
	ups []*upstream
	up  *upstream
	// req and resp are reused for every exchange; sent is the request head
	// as the next hop gets it (kept for a replay), out any other head being
	// written.
	req, resp Head
	sent, out []byte
	// watch, when set, carries the result of the wait for the client's
	// next byte that began once the request was read whole: it notices a
	// client that leaves while its answer is awaited, and the next
	// readRequest takes its result instead of waiting itself.
	watch chan peeked
	x     life
}

// peeked is how a watch for the client's next byte ended.
type peeked struct{ err error }

// readRequest waits for the next request and parses its head, which stays
// in the reader (not consumed) so that it can be handed over whole. The
// wait for its first byte is bounded by the idle timeout (the read
// header timeout for a connection's first request); the rest of every
// head, first or not, by the read header timeout.
func (c *conn) readRequest(first bool) error {
	wait := c.s.IdleTimeout
	if first {
		wait = c.s.ReadHeaderTimeout
	}
	deadline := false
	if wait > 0 {
		_ = c.nc.SetReadDeadline(time.Now().Add(wait))
		deadline = true
	}
	if err := c.firstByte(); err != nil {
		return err
	}
	c.s.setActive(c)
	if d := c.s.ReadHeaderTimeout; d > 0 && !first {
		_ = c.nc.SetReadDeadline(time.Now().Add(d))
		deadline = true
	}
	for {
		b, _ := c.br.Peek(c.br.Buffered())
		n, err := headEnd(b)
		if err != nil {
			return err
		}
		if n > 0 {
			if deadline {
				_ = c.nc.SetReadDeadline(time.Time{})
			}
			if err := parseRequest(b[:n], &c.req); err != nil {
				if errors.Is(err, errBothFramings) {
					return err
				}
				return errNotSimple
			}
			return nil
		}
		if len(b) == c.br.Size() {
			return errNotSimple // a head this large is net/http's to judge
		}
		if !deadline && c.s.ReadHeaderTimeout > 0 {
			_ = c.nc.SetReadDeadline(time.Now().Add(c.s.ReadHeaderTimeout))
			deadline = true
		}
		if _, err := c.br.Peek(len(b) + 1); err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
}

// firstByte waits for the next request's first byte: through the watch
// that began during the last exchange, when one runs, else by reading.
func (c *conn) firstByte() error {
	if w := c.watch; w != nil {
		c.watch = nil
		if r := <-w; r.err != nil && c.br.Buffered() == 0 {
			return r.err
		}
		return nil
	}
	_, err := c.br.Peek(1)
	return err
}

// stopWatch waits for a watch still running once the connection is
// closed, so that nothing reads its buffer when it is given back.
func (c *conn) stopWatch() {
	if w := c.watch; w != nil {
		c.watch = nil
		<-w // the connection is closed: how the watch ended says nothing
	}
}
