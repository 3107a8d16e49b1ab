package h1

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"code.tuna.am/tuna/k8s-operator/internal/httprule"
)

// exchange forwards the request whose head is in c.req and copies its
// answer back; it reports whether the connection may carry the next one.
func (c *conn) exchange(rt *Route) bool {
	start := time.Now()
	h := &c.req
	isHead := string(h.Method) == "HEAD"
	closing := h.Close
	hasBody := h.Chunked || h.ContentLength > 0
	c.sent = appendRequest(c.sent[:0], h, rt)
	chunked, length := h.Chunked, h.ContentLength
	_, _ = c.br.Discard(len(h.Raw)) // h's slices are stale from here

	c.begin()
	status, in, out := 0, int64(0), int64(0)
	var body *bodyCopy
	defer func() {
		_ = c.finish()
		if rt.Done != nil {
			rt.Done(status, in, out, time.Since(start))
		}
	}()
	for sends := 1; ; sends++ {
		up, err := c.upstream(rt)
		var written int64
		if err == nil {
			if err = c.use(up.nc); err == nil {
				body, written, err = c.send(up, chunked, length)
			}
		}
		if err == nil {
			err = c.readAnswer(up)
		}
		if err == nil {
			break
		}
		if body == nil && c.ended() == nil && httprule.Replay(written, err, sends) {
			// Nothing of it reached the upstream, which was found closed:
			// it is sent on a fresh connection, whatever its method.
			c.dropUpstream()
			continue
		}
		status = c.fail(rt, err, hasBody || closing)
		ok := c.endBody(body)
		c.dropUpstream()
		in = body.count()
		return status != 0 && ok && !closing && !hasBody && c.ended() == nil
	}

	r := &c.resp
	noBody := isHead || r.Status == 204 || r.Status == 304
	untilEOF := !noBody && !r.Chunked && r.ContentLength < 0
	closing = closing || untilEOF || c.s.stopping.Load()
	status = r.Status
	c.out = appendResponse(c.out[:0], r, closing, rt)
	_, _ = c.up.br.Discard(len(r.Raw))
	err := c.answering()
	if err == nil {
		_, err = c.bw.Write(c.out)
	}
	if err == nil {
		p := pipe{w: c.bw, r: c.up.br}
		switch {
		case noBody:
		case r.Chunked:
			out, err = p.copyChunked()
		case untilEOF:
			out, err = p.copyUntilEOF()
		default:
			out, err = p.copyLength(r.ContentLength)
		}
	}
	if err == nil {
		err = c.bw.Flush()
	}
	ok := c.endBody(body)
	in = body.count()
	if err == nil && ok && c.ended() == nil && httprule.Reusable(!untilEOF, r.Close, c.up.br.Buffered()) {
		c.up.keep()
	} else {
		// Bytes after the answer were never asked for, or the answer was
		// cut: the connection cannot be trusted with the next request.
		c.dropUpstream()
	}
	return err == nil && ok && !closing && c.ended() == nil
}

// fail answers a request that got no answer, if the client is still
// there to read one; it returns the status sent (0 for none). A request
// with a body closes its connection after the relay's own answer: the
// body may be left unread.
func (c *conn) fail(rt *Route, err error, closing bool) int {
	var a Answer
	switch why := c.ended(); {
	case errors.Is(why, errClientGone):
		return 0
	case errors.Is(why, errBadBody):
		a = TextAnswer(http.StatusBadRequest, "tuna: the request body breaks its chunked framing")
	case errors.Is(why, errExchangeDue):
		a = TextAnswer(http.StatusGatewayTimeout, fmt.Sprintf("tuna: no answer within %s", c.s.ExchangeTimeout))
	default:
		a = rt.Fail(err)
	}
	if c.answer(a, closing) {
		return a.Status
	}
	return 0
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

// send writes the request head and its body. A body that has arrived
// whole goes in the same write as the head, and leaves the client's
// reader only once written, so that a request that met a closed
// connection can be sent again whole. Any other body is copied beside the
// reading of the answer, as net/http does, so that a backend that answers
// before it has read all of it is not deadlocked; such a request is never
// sent again. A nil bodyCopy: nothing of a body was consumed. written is
// what the upstream accepted before send returned (the copy of a body
// that streams goes on after).
func (c *conn) send(up *upstream, chunked bool, length int64) (b *bodyCopy, written int64, err error) {
	if _, err := up.bw.Write(c.sent); err != nil {
		return nil, up.w.N, err
	}
	if !chunked && length <= 0 {
		if err := up.bw.Flush(); err != nil {
			return nil, up.w.N, err
		}
		c.watchSoon()
		return nil, up.w.N, nil
	}
	if !chunked && int64(c.br.Buffered()) >= length {
		body, _ := c.br.Peek(int(length))
		_, _ = up.bw.Write(body)
		if err := up.bw.Flush(); err != nil {
			return nil, up.w.N, err
		}
		_, _ = c.br.Discard(len(body))
		c.watchSoon()
		return &bodyCopy{n: length, done: true, ok: true}, up.w.N, nil
	}
	written = up.w.N
	b = &bodyCopy{result: make(chan error, 1)}
	p := pipe{w: up.bw, r: c.br}
	if d := c.s.BodyTimeout; d > 0 {
		p.wait = func() { _ = c.nc.SetReadDeadline(time.Now().Add(d)) }
	}
	go func() {
		var err error
		if chunked {
			b.n, err = p.copyChunked()
		} else {
			b.n, err = p.copyLength(length)
		}
		if err == nil {
			if err = up.bw.Flush(); err != nil {
				err = p.write(err)
			}
		}
		switch {
		case err == nil:
			if c.s.BodyTimeout > 0 {
				_ = c.nc.SetReadDeadline(time.Time{})
			}
			c.watchSoon()
		case p.malformed():
			c.end(errBadBody)
		case p.readErr != nil:
			// The client left mid-body, or stalled past the body
			// timeout: the upstream must not wait for the rest.
			c.end(errClientGone)
		}
		b.result <- err
	}()
	return b, written, nil
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
		c.out = appendResponse(c.out[:0], &c.resp, false, nil)
		_, _ = up.br.Discard(len(raw))
		if _, err := c.bw.Write(c.out); err != nil {
			return err
		}
		if err := c.bw.Flush(); err != nil {
			return err
		}
	}
}

// refuse answers a request the relay will not take, and closes the
// connection after it (lingering: the request's body is unread).
func (c *conn) refuse(status int, msg string) {
	c.bw = writers.Get().(*bufio.Writer)
	c.bw.Reset(c.nc)
	c.answer(TextAnswer(status, msg), true)
	c.bw.Reset(nil)
	writers.Put(c.bw)
	c.bw = nil
	c.linger = c.direct == nil
}

// answer writes the relay's own answer; it reports whether it went out.
func (c *conn) answer(a Answer, closing bool) bool {
	c.out = appendAnswer(c.out[:0], a, closing)
	if _, err := c.bw.Write(c.out); err != nil {
		return false
	}
	return c.bw.Flush() == nil
}
