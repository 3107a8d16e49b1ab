package h2serve

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"
)

// body is a stream's request body: the DATA the client sent, up to the
// window the server granted; its fields are under c.mu.
type body struct {
	st       *stream
	buf      []byte
	r        int // read offset in buf
	ended    bool
	err      error
	closed   bool
	window   int64 // what the client may still send on the stream
	unsent   int64 // consumed bytes not yet given back
	declared int64 // content-length, -1 when not declared
	received int64
	deadline time.Time
	notify   chan struct{}
	trailer  http.Header // the client's trailers, for the handler's request at EOF
}

var errBodyLength = errors.New("h2serve: request body length differs from its content-length")

func (b *body) notifyLocked() {
	select {
	case b.notify <- struct{}{}:
	default:
	}
}

// endLocked: the client ended the stream.
func (b *body) endLocked() {
	if b.declared >= 0 && b.received != b.declared && b.err == nil {
		b.err = errBodyLength
	}
	b.ended = true
	b.notifyLocked()
}

// appendLocked takes a DATA frame's bytes; false: more than the
// declared length.
func (b *body) appendLocked(p []byte) bool {
	b.received += int64(len(p))
	if b.declared >= 0 && b.received > b.declared {
		return false
	}
	if b.closed {
		return true
	}
	if b.r > 0 {
		b.buf = b.buf[:copy(b.buf, b.buf[b.r:])]
		b.r = 0
	}
	b.buf = append(b.buf, p...)
	return true
}

// Read reads the client's DATA as it comes, up to the deadline the
// handler set (SetReadDeadline: os.ErrDeadlineExceeded past it).
func (b *body) Read(p []byte) (int, error) {
	c := b.st.c
	c.mu.Lock()
	for b.r == len(b.buf) && !b.ended && b.err == nil && !b.closed {
		dl := b.deadline
		c.mu.Unlock()
		if !b.wait(dl) {
			return 0, os.ErrDeadlineExceeded
		}
		c.mu.Lock()
	}
	if b.r < len(b.buf) {
		n := copy(p, b.buf[b.r:])
		b.r += n
		c.giveBackLocked(b.st, int64(n))
		start := c.startFlushLocked()
		c.mu.Unlock()
		if start {
			c.flush()
		}
		return n, nil
	}
	defer c.mu.Unlock()
	switch {
	case b.closed:
		return 0, errBodyClosed
	case b.err != nil:
		return 0, b.err
	}
	for k, vv := range b.trailer {
		b.st.req.Trailer[k] = vv
	}
	b.trailer = nil
	return 0, io.EOF
}

var errBodyClosed = errors.New("h2serve: read on a closed body")

// wait waits for more of the body until dl (zero: no bound).
func (b *body) wait(dl time.Time) bool {
	if dl.IsZero() {
		<-b.notify
		return true
	}
	d := time.Until(dl)
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-b.notify:
		return true
	case <-t.C:
		return false
	}
}

// Close drops what is buffered and what comes later, giving it back to
// the connection's window.
func (b *body) Close() error {
	c := b.st.c
	c.mu.Lock()
	if !b.closed {
		b.closed = true
		c.giveBackLocked(nil, int64(len(b.buf)-b.r))
		b.buf, b.r = nil, 0
		b.notifyLocked()
	}
	c.mu.Unlock()
	c.flushAsync()
	return nil
}

func (b *body) setDeadline(t time.Time) {
	c := b.st.c
	c.mu.Lock()
	b.deadline = t
	b.notifyLocked() // a waiting Read takes the new deadline
	c.mu.Unlock()
}

// resetBudget bounds the streams a client may reset while their
// handlers run, and those the server refused, per connection: a bucket
// of 2 × the stream limit, refilled at the stream limit per second. A
// client past it gets GOAWAY (ENHANCE_YOUR_CALM): the rapid-reset attack
// (CVE-2023-44487) opens and resets streams to make the server start
// work that no slot accounts for.
type resetBudget struct {
	tokens, max, rate float64
	last              time.Time
}

func newResetBudget(maxStreams uint32) resetBudget {
	m := 2 * float64(maxStreams)
	return resetBudget{tokens: m, max: m, rate: float64(maxStreams)}
}

func (b *resetBudget) take(now time.Time) bool {
	if !b.last.IsZero() {
		b.tokens = min(b.max, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
