package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"code.tuna.am/tuna/k8s-operator/internal/httpfwd"
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
}

// upstream is a pinned upstream connection. Its buffers are held only
// during an exchange: an idle keep-alive connection costs no buffer.
type upstream struct {
	nc  net.Conn
	key string
	r   io.Reader // nc, or its direct reader
	br  *bufio.Reader
	bw  *bufio.Writer
}

// hold takes the buffers for an exchange.
func (u *upstream) hold() {
	if u.br == nil {
		u.br = upstreamReaders.Get().(*bufio.Reader)
		u.br.Reset(u.r)
		u.bw = writers.Get().(*bufio.Writer)
		u.bw.Reset(u.nc)
	}
}

// release gives the buffers back; the reader must be empty.
func (u *upstream) release() {
	if u.br != nil {
		u.br.Reset(nil)
		upstreamReaders.Put(u.br)
		u.bw.Reset(nil)
		writers.Put(u.bw)
		u.br, u.bw = nil, nil
	}
}

// errTooLarge is an answer head over the upstream buffer.
var errTooLarge = fmt.Errorf("the answer's head is larger than %d KiB", upstreamBuffer>>10)

// readRequest waits for the next request and parses its head, which stays
// in the reader (not consumed) so that it can be handed over whole.
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
	if _, err := c.br.Peek(1); err != nil {
		return err
	}
	c.s.setActive(c)
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

// exchange forwards the request whose head is in c.req and copies its
// answer back; it reports whether the connection may carry the next one.
func (c *conn) exchange(rt *Route) bool {
	start := time.Now()
	h := &c.req
	isHead := string(h.Method) == "HEAD"
	closing := h.Close
	hasBody := h.Chunked || h.ContentLength > 0
	replayable := !hasBody && (isHead || string(h.Method) == "GET" || string(h.Method) == "OPTIONS")
	c.sent = appendRequest(c.sent[:0], h, rt)
	chunked, length := h.Chunked, h.ContentLength
	_, _ = c.br.Discard(len(h.Raw)) // h's slices are stale from here

	status, in, out := 0, int64(0), int64(0)
	if rt.Done != nil {
		defer func() { rt.Done(status, in, out, time.Since(start)) }()
	}
	var body *bodyCopy
	for attempt := 0; ; attempt++ {
		up, err := c.upstream(rt)
		if err == nil {
			body, err = c.send(up, chunked, length)
		}
		if err == nil {
			err = c.readAnswer(up)
		}
		if err == nil {
			break
		}
		if replayable && attempt < 2 && httpfwd.ClosedUnanswered(err) {
			c.dropUpstream() // no body: nothing else uses the connection
			continue
		}
		a := rt.Fail(err)
		status = a.Status
		// A request with a body closes its connection after the relay's
		// own answer: the body may be left unread.
		sent := c.answer(a, closing || hasBody)
		ok := c.endBody(body)
		c.dropUpstream()
		in = body.count()
		return sent && ok && !closing && !hasBody
	}

	r := &c.resp
	noBody := isHead || r.Status == 204 || r.Status == 304
	untilEOF := !noBody && !r.Chunked && r.ContentLength < 0
	upClose := r.Close || untilEOF
	closing = closing || untilEOF || c.s.stopping.Load()
	status = r.Status
	c.out = appendResponse(c.out[:0], r, closing)
	_, _ = c.up.br.Discard(len(r.Raw))
	_, err := c.bw.Write(c.out)
	if err == nil {
		switch {
		case noBody:
		case r.Chunked:
			out, err = copyChunked(c.bw, c.up.br)
		case untilEOF:
			out, err = copyUntilEOF(c.bw, c.up.br)
		default:
			out, err = copyLength(c.bw, c.up.br, r.ContentLength)
		}
	}
	if err == nil {
		err = c.bw.Flush()
	}
	ok := c.endBody(body)
	in = body.count()
	if err != nil || !ok || upClose || c.up.br.Buffered() > 0 {
		// Bytes after the answer were never asked for: the connection
		// cannot be trusted with the next request.
		c.dropUpstream()
	} else {
		c.up.release()
	}
	return err == nil && ok && !closing
}

// relay runs one exchange with the client's write buffer held for it
// only: an idle keep-alive connection holds its read buffer alone.
func (c *conn) relay(rt *Route) bool {
	c.bw = writers.Get().(*bufio.Writer)
	c.bw.Reset(c.nc)
	keep := c.exchange(rt)
	c.bw.Reset(nil)
	writers.Put(c.bw)
	c.bw = nil
	return keep
}

// endBody waits for the request body's copy to end; it reports whether the
// whole body was read. The answer may be complete while the body is still
// being sent: the rest of the body is then unread, so neither connection
// can be reused, and both are stopped.
//
// The copy writes into the upstream connection's buffer: the caller drops
// that connection only once endBody has returned.
func (c *conn) endBody(b *bodyCopy) bool {
	if b.finished() {
		return b.wait()
	}
	if c.up != nil {
		_ = c.up.nc.Close() // ends a write blocked on it
	}
	if c.direct != nil {
		_ = c.nc.Close() // the answer is out; the connection ends anyway
	} else {
		_ = c.nc.SetReadDeadline(time.Now())
		c.linger = true
	}
	b.wait()
	return false
}

// Lingering close: a connection closed with request bytes still unread
// in it is reset by the kernel, and the reset can reach the client before
// it has read the answer it was sent (a 413 to an upload, say). So such a
// connection sends its end first and reads what the client still sends,
// for a while and up to a bound, before it closes (as net/http and nginx
// do).
const (
	lingerTime  = 500 * time.Millisecond
	lingerBytes = 1 << 20
)

func (c *conn) closeLingering() {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(lingerTime))
	_, _ = io.CopyN(io.Discard, c.nc, lingerBytes)
}

// maxPinned is how many upstream connections one client connection
// keeps, one per key.
const maxPinned = 4

// upstream returns the pinned connection for rt's key, or a new one. A
// pinned connection with unasked bytes in it is not reused.
func (c *conn) upstream(rt *Route) (*upstream, error) {
	for _, u := range c.ups {
		if u.key == rt.Key {
			c.up = u
			u.hold()
			return u, nil
		}
	}
	if len(c.ups) == maxPinned {
		c.up = c.ups[0]
		c.dropUpstream()
	}
	nc, err := rt.Dial(context.Background())
	if err != nil {
		return nil, err
	}
	u := &upstream{nc: nc, key: rt.Key, r: readerOf(nc)}
	u.hold()
	c.ups = append(c.ups, u)
	c.up = u
	return u, nil
}

// dropUpstream closes the current upstream connection.
func (c *conn) dropUpstream() {
	u := c.up
	if u == nil {
		return
	}
	c.up = nil
	for i, v := range c.ups {
		if v == u {
			c.ups = append(c.ups[:i], c.ups[i+1:]...)
			break
		}
	}
	_ = u.nc.Close()
	u.release()
}

// dropAll closes every pinned upstream connection.
func (c *conn) dropAll() {
	for len(c.ups) > 0 {
		c.up = c.ups[0]
		c.dropUpstream()
	}
}

// send writes the request head and its body. A body that has arrived
// whole goes in the same write as the head; any other is copied beside
// the reading of the answer, as net/http does, so that a backend that
// answers before it has read all of it is not deadlocked.
func (c *conn) send(up *upstream, chunked bool, length int64) (*bodyCopy, error) {
	if _, err := up.bw.Write(c.sent); err != nil {
		return nil, err
	}
	if !chunked && length > 0 && int64(c.br.Buffered()) >= length {
		n, err := copyLength(up.bw, c.br, length)
		b := &bodyCopy{n: n, done: true, ok: err == nil}
		if err != nil {
			return b, err
		}
		return b, up.bw.Flush()
	}
	if !chunked && length <= 0 {
		return nil, up.bw.Flush()
	}
	b := &bodyCopy{result: make(chan error, 1)}
	go func() {
		var err error
		if chunked {
			b.n, err = copyChunked(up.bw, c.br)
		} else {
			b.n, err = copyLength(up.bw, c.br, length)
		}
		if err == nil {
			err = up.bw.Flush()
		}
		b.result <- err
	}()
	return b, nil
}

// bodyCopy is a request body on its way; nil is a request without one.
type bodyCopy struct {
	result chan error
	n      int64
	done   bool
	ok     bool
}

// finished reports whether the copy has ended.
func (b *bodyCopy) finished() bool {
	if b == nil || b.done {
		return true
	}
	select {
	case err := <-b.result:
		b.done, b.ok = true, err == nil
		return true
	default:
		return false
	}
}

// wait waits for the copy (the caller has closed the upstream connection
// if it must not wait long) and reports whether the whole body was read
// from the client.
func (b *bodyCopy) wait() bool {
	if b == nil {
		return true
	}
	if !b.done {
		err := <-b.result
		b.done, b.ok = true, err == nil
	}
	return b.ok
}

func (b *bodyCopy) count() int64 {
	if b == nil {
		return 0
	}
	return b.n
}

// readAnswer reads the answer's head into c.resp. Interim answers (1xx)
// go on to the client as they come; a switch of protocols, which the
// relay never asks for, is an error.
func (c *conn) readAnswer(up *upstream) error {
	for {
		if _, err := up.br.Peek(1); err != nil {
			return err
		}
		var raw []byte
		for {
			b, _ := up.br.Peek(up.br.Buffered())
			n, err := headEnd(b)
			if err != nil {
				return ErrMalformed
			}
			if n > 0 {
				raw = b[:n]
				break
			}
			if len(b) == up.br.Size() {
				return errTooLarge
			}
			if _, err := up.br.Peek(len(b) + 1); err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				return err
			}
		}
		if err := parseResponse(raw, &c.resp); err != nil {
			return err
		}
		if c.resp.Status >= 200 {
			return nil
		}
		if c.resp.Status == 101 {
			return errors.New("the upstream switched protocols on a request that asked for no upgrade")
		}
		c.out = appendResponse(c.out[:0], &c.resp, false)
		_, _ = up.br.Discard(len(raw))
		if _, err := c.bw.Write(c.out); err != nil {
			return err
		}
		if err := c.bw.Flush(); err != nil {
			return err
		}
	}
}

// answer writes the relay's own answer; it reports whether it went out.
func (c *conn) answer(a Answer, closing bool) bool {
	c.out = appendAnswer(c.out[:0], a, closing)
	if _, err := c.bw.Write(c.out); err != nil {
		return false
	}
	return c.bw.Flush() == nil
}
