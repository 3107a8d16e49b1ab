// Package coalesce gathers the writes of many goroutines to one
// connection into fewer system calls.
//
// An SSH connection carries every channel of a tunnel session, and
// golang.org/x/crypto/ssh flushes each packet with a write of its own while
// it holds the connection's lock: with 64 requests in flight, the edge and
// the agent each paid one write system call per message. Under Conn, a
// write that arrives while an earlier one is still being handed to the
// kernel is copied behind it and returns at once, and the next system call
// takes everything gathered meanwhile. A write that finds the connection
// quiet goes to the kernel at once, on its caller's goroutine: no added
// latency when there is nothing to gather.
package coalesce

import (
	"net"
	"os"
	"runtime"
	"sync"
	"time"
)

// MaxPending bounds the bytes gathered behind the system call in flight
// (which holds as many at most): a writer past it waits for that call, as
// it would have waited for its own (an SSH packet is at most 35,000
// bytes).
const MaxPending = 128 << 10

// closeLinger bounds how long Close lets the writes it accepted reach the
// kernel when the peer is not reading, with the connection then closed
// regardless (a variable for the tests).
var closeLinger = 2 * time.Second

// quietAfter is how long after the previous write a new one counts as
// alone: it goes to the kernel on its caller's goroutine. A write sooner
// than that is part of a burst, and the next one is likely to be waiting
// for the SSH lock behind it: it is handed to a flusher goroutine, so that
// writes arriving while that system call runs are gathered. (A variable
// for the tests.)
var quietAfter = 50 * time.Microsecond

// Conn is a net.Conn whose concurrent writes are coalesced. A write
// returns once its bytes are accepted, like a write to a socket's send
// buffer; the first error of a system call is returned by every later
// Write, and closes the connection (the bytes after it can never follow
// in order).
type Conn struct {
	net.Conn

	mu       sync.Mutex
	cond     sync.Cond // signalled when pending shrinks or flushing ends
	pending  []byte    // accepted, not yet handed to the kernel
	flushing bool      // a system call (inline or by the flusher) is running
	err      error     // the first failed system call's error
	closed   bool
	last     time.Time // when the previous Write began
	// wdl is the write deadline, so that a Write past it fails at once
	// even when it would only have been gathered.
	wdl time.Time
}

// New wraps c.
func New(c net.Conn) *Conn {
	cc := &Conn{Conn: c}
	cc.cond.L = &cc.mu
	return cc
}

// Write accepts p in order after every earlier Write.
func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	for c.err == nil && !c.closed && len(c.pending) > 0 && len(c.pending)+len(p) > MaxPending {
		c.cond.Wait()
	}
	now := time.Now()
	if err := c.refusal(now); err != nil {
		c.mu.Unlock()
		return 0, err
	}
	alone := !c.flushing && now.Sub(c.last) >= quietAfter
	c.last = now
	if alone {
		// Nothing in flight and nothing recent: this write's own system
		// call, with no copy and no hand-over.
		c.flushing = true
		c.mu.Unlock()
		n, err := c.Conn.Write(p)
		c.mu.Lock()
		c.finished(err)
		c.mu.Unlock()
		if err != nil {
			return n, err
		}
		return len(p), nil
	}
	if c.pending == nil {
		c.pending = getBuf()
	}
	c.pending = append(c.pending, p...)
	if !c.flushing {
		c.flushing = true
		go c.flush()
	}
	c.mu.Unlock()
	return len(p), nil
}

// refusal is why a Write cannot be accepted now, or nil; c.mu is held.
func (c *Conn) refusal(now time.Time) error {
	switch {
	case c.err != nil:
		return c.err
	case c.closed:
		return net.ErrClosed
	case !c.wdl.IsZero() && !now.Before(c.wdl):
		return os.ErrDeadlineExceeded
	}
	return nil
}

// finished ends a system call with err; when bytes were gathered behind
// it, a flusher takes them. c.mu is held.
func (c *Conn) finished(err error) {
	if err != nil && c.err == nil {
		c.fail(err)
	}
	if c.err == nil && len(c.pending) > 0 {
		go c.flush()
		return
	}
	c.idle()
}

// idle ends the running system call's turn: nothing is in flight. A Close
// that came meanwhile left closing the connection to this turn. c.mu is
// held.
func (c *Conn) idle() {
	c.flushing = false
	c.drop()
	if c.closed {
		_ = c.Conn.Close()
	}
	c.cond.Broadcast()
}

// flush hands the gathered bytes to the kernel until none are left; it
// runs while c.flushing is set, one at a time.
func (c *Conn) flush() {
	// The goroutines already runnable (other channels' writers, woken by
	// the same poll) run first and gather their bytes behind this call;
	// with none, this returns at once.
	runtime.Gosched()
	c.mu.Lock()
	defer c.mu.Unlock()
	var spare []byte
	for c.err == nil && len(c.pending) > 0 {
		out := c.pending
		c.pending = spare
		c.cond.Broadcast() // room again for writers waiting
		c.mu.Unlock()
		_, err := c.Conn.Write(out)
		c.mu.Lock()
		spare = out[:0]
		if err != nil && c.err == nil {
			c.fail(err)
		}
		c.cond.Broadcast()
	}
	putBuf(spare)
	c.idle()
}

// fail records the first error and closes the connection: later bytes
// cannot follow bytes that were lost. c.mu is held.
func (c *Conn) fail(err error) {
	c.err = err
	c.pending = nil
	_ = c.Conn.Close()
}

// drop gives the pending buffer back when nothing is in it, so an idle
// connection holds none. c.mu is held.
func (c *Conn) drop() {
	if len(c.pending) == 0 && c.pending != nil {
		putBuf(c.pending)
		c.pending = nil
	}
}

// Read passes through; after Close it reports net.ErrClosed, as a closed
// socket would, not the deadline Close used to wake it.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.mu.Lock()
		if c.closed {
			err = net.ErrClosed
		}
		c.mu.Unlock()
	}
	return n, err
}

// Close stops reads at once and lets the accepted writes reach the kernel
// (for at most closeLinger when the peer does not read), then closes.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return net.ErrClosed
	}
	c.closed = true
	c.cond.Broadcast()
	if !c.flushing {
		c.mu.Unlock()
		return c.Conn.Close()
	}
	// The flusher closes the connection when it is done; until then a
	// reader must not wait for it.
	_ = c.SetReadDeadline(time.Unix(1, 0))
	if c.wdl.IsZero() || c.wdl.After(time.Now().Add(closeLinger)) {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(closeLinger))
	}
	c.mu.Unlock()
	return nil
}

// SetDeadline sets both deadlines, as net.Conn's.
func (c *Conn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.wdl = t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

// SetWriteDeadline bounds the system calls in flight and refuses Writes
// after t.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.wdl = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

func getBuf() []byte { return (*bufs.Get().(*[]byte))[:0] }

func putBuf(b []byte) {
	if b == nil || cap(b) > MaxPending+64<<10 {
		return
	}
	b = b[:0]
	bufs.Put(&b)
}
