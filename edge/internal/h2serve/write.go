package h2serve

import (
	"errors"
	"runtime"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// pendingWriter is where the framer writes: the connection's pending
// bytes, appended under c.mu.
type pendingWriter struct{ c *conn }

func (w pendingWriter) Write(p []byte) (int, error) {
	w.c.pending = append(w.c.pending, p...)
	return len(p), nil
}

// errWriteStall: the client opened no window for an answer within the
// stall timeout.
var errWriteStall = errors.New("h2serve: the client opened no flow-control window in time")

// startFlushLocked reports whether the caller, holding c.mu, must flush
// (call flush after unlocking): nobody else is.
func (c *conn) startFlushLocked() bool {
	if c.flushing || len(c.pending) == 0 || c.werr != nil {
		return false
	}
	c.flushing = true
	return true
}

// flush writes what is pending, then what was added meanwhile, until
// nothing is left. Before the first write it yields once, so that
// handlers already runnable add their frames to the same write.
func (c *conn) flush() {
	runtime.Gosched()
	for {
		c.mu.Lock()
		if len(c.pending) == 0 || c.werr != nil {
			c.flushing = false
			c.cond.Broadcast()
			c.mu.Unlock()
			return
		}
		buf := c.pending
		c.pending = c.spare[:0]
		c.spare = nil
		c.cond.Broadcast() // writers waiting for room
		c.mu.Unlock()
		_ = c.nc.SetWriteDeadline(time.Now().Add(orDefault(c.s.WriteTimeout)))
		_, err := c.nc.Write(buf)
		c.mu.Lock()
		if c.spare == nil && cap(buf) <= 2*maxPending {
			c.spare = buf[:0]
		}
		if err != nil && c.werr == nil {
			c.werr = err
		}
		c.mu.Unlock()
		if err != nil {
			_ = c.nc.Close()
		}
	}
}

// flushAsync makes sure what is pending is written, on another
// goroutine if a write is needed: the serve goroutine must not block on
// a client that does not read while it sends.
func (c *conn) flushAsync() {
	c.mu.Lock()
	start := c.startFlushLocked()
	c.mu.Unlock()
	if start {
		go c.flush()
	}
}

// flushSync writes what is pending and waits for it (the last frames of
// a connection).
func (c *conn) flushSync() {
	c.mu.Lock()
	start := c.startFlushLocked()
	c.mu.Unlock()
	if start {
		c.flush()
	}
	c.mu.Lock()
	for c.flushing && c.werr == nil {
		c.cond.Wait()
	}
	c.mu.Unlock()
}

// roomLocked waits, under c.mu, until the pending bytes are under
// maxPending, the connection failed, or st was reset.
func (c *conn) roomLocked(st *stream) error {
	for len(c.pending) >= maxPending && c.flushing {
		if err := st.writableLocked(); err != nil {
			return err
		}
		c.cond.Wait()
	}
	return st.writableLocked()
}

// controlRoomLocked reports whether the serve goroutine may queue a
// control frame (an ACK, a WINDOW_UPDATE, a reset): a client that sends
// while it reads nothing cannot make the server buffer without bound.
func (c *conn) controlRoomLocked() bool { return len(c.pending) < 2*maxPending }

// writeHeadersLocked encodes fields as one header block on st, split
// into CONTINUATION frames to the client's frame size.
func (c *conn) writeHeadersLocked(id uint32, fields []hpack.HeaderField, end bool) {
	c.hbuf.Reset()
	for _, f := range fields {
		_ = c.henc.WriteField(f)
	}
	block := c.hbuf.Bytes()
	max := int(c.peerMaxFrame)
	first := block
	if len(first) > max {
		first = block[:max]
	}
	block = block[len(first):]
	_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: end, EndHeaders: len(block) == 0})
	for len(block) > 0 {
		n := min(len(block), max)
		_ = c.fr.WriteContinuation(id, n == len(block), block[:n])
		block = block[n:]
	}
}

// writeData sends p on st as DATA frames within the flow-control
// windows, waiting for the client to open them (up to the stall
// timeout); end ends the stream with the last frame.
func (c *conn) writeData(st *stream, p []byte, end bool) error {
	c.mu.Lock()
	var stall *time.Timer
	var deadline time.Time
	defer func() {
		if stall != nil {
			stall.Stop()
		}
	}()
	for {
		if len(c.pending) >= maxPending && c.startFlushLocked() {
			// A long write: what is pending goes out before more is added.
			c.mu.Unlock()
			c.flush()
			c.mu.Lock()
			continue
		}
		if err := c.roomLocked(st); err != nil {
			c.mu.Unlock()
			return err
		}
		n := int64(len(p))
		n = min(n, st.sendWindow, c.sendWindow, int64(c.peerMaxFrame))
		if n <= 0 && (len(p) > 0) {
			if stall == nil {
				d := orDefault(c.s.StallTimeout)
				deadline = time.Now().Add(d)
				stall = time.AfterFunc(d, func() { c.mu.Lock(); c.cond.Broadcast(); c.mu.Unlock() })
			} else if time.Now().After(deadline) {
				st.resetLocked(errWriteStall)
				c.queueResetLocked(st.id, http2.ErrCodeFlowControl)
				start := c.startFlushLocked()
				c.mu.Unlock()
				if start {
					c.flush()
				}
				return errWriteStall
			}
			c.cond.Wait()
			continue
		}
		last := end && int(n) == len(p)
		_ = c.fr.WriteData(st.id, last, p[:n])
		st.sendWindow -= n
		c.sendWindow -= n
		p = p[n:]
		if last {
			st.sentEnd = true
		}
		if len(p) == 0 {
			start := c.startFlushLocked()
			c.mu.Unlock()
			if start {
				c.flush()
			}
			return nil
		}
	}
}

// queueResetLocked queues RST_STREAM for id.
func (c *conn) queueResetLocked(id uint32, code http2.ErrCode) {
	_ = c.fr.WriteRSTStream(id, code)
}
