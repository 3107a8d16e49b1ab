package h2serve

import (
	"errors"
	"time"

	"golang.org/x/net/http2"
)

// handle acts on one frame read from the client; an error ends the
// connection (a connError with GOAWAY first).
func (c *conn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		return c.settings(f)
	case *http2.PingFrame:
		if f.IsAck() {
			return nil
		}
		return c.control(func() { _ = c.fr.WritePing(true, f.Data) })
	case *http2.WindowUpdateFrame:
		return c.windowUpdate(f)
	case *http2.HeadersFrame:
		return c.headers(f)
	case *http2.ContinuationFrame:
		return connError{http2.ErrCodeProtocol, "CONTINUATION without HEADERS"}
	case *http2.DataFrame:
		return c.data(f)
	case *http2.RSTStreamFrame:
		return c.rstStream(f)
	case *http2.GoAwayFrame:
		// The client takes no more answers past its last stream; the
		// streams in flight finish, and no new one is taken.
		c.mu.Lock()
		c.goingAway = true
		done := c.running == 0 && len(c.streams) == 0
		c.mu.Unlock()
		if done {
			return errConnClosed
		}
		return nil
	case *http2.PushPromiseFrame:
		return connError{http2.ErrCodeProtocol, "PUSH_PROMISE from a client"}
	}
	// PRIORITY and unknown types are ignored (RFC 9113 sections 5.3.2, 5.5).
	return nil
}

// control queues a control frame that answers the client (an ACK) and
// flushes it; a client that sends them faster than it reads them is cut
// off.
func (c *conn) control(write func()) error {
	c.mu.Lock()
	if !c.controlRoomLocked() {
		c.mu.Unlock()
		return connError{http2.ErrCodeEnhanceYourCalm, "control frames faster than the client reads"}
	}
	write()
	c.mu.Unlock()
	c.flushAsync()
	return nil
}

func (c *conn) settings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	c.mu.Lock()
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingInitialWindowSize:
			delta := int64(s.Val) - c.peerInitWindow
			for _, st := range c.streams {
				if st.sendWindow+delta > maxWindow {
					return connError{http2.ErrCodeFlowControl, "INITIAL_WINDOW_SIZE overflows a stream's window"}
				}
				st.sendWindow += delta
			}
			c.peerInitWindow = int64(s.Val)
		case http2.SettingMaxFrameSize:
			c.peerMaxFrame = s.Val
		case http2.SettingHeaderTableSize:
			c.henc.SetMaxDynamicTableSizeLimit(s.Val)
		}
		return nil
	})
	c.cond.Broadcast()
	c.mu.Unlock()
	if err != nil {
		var ce connError
		if errors.As(err, &ce) {
			return ce
		}
		return connError{http2.ErrCodeProtocol, err.Error()}
	}
	return c.control(func() { _ = c.fr.WriteSettingsAck() })
}

// maxWindow is the largest flow-control window (RFC 9113 section 6.9.1).
const maxWindow = 1<<31 - 1

func (c *conn) windowUpdate(f *http2.WindowUpdateFrame) error {
	inc := int64(f.Increment)
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.StreamID == 0 {
		if c.sendWindow+inc > maxWindow {
			return connError{http2.ErrCodeFlowControl, "WINDOW_UPDATE overflows the connection's window"}
		}
		c.sendWindow += inc
		c.cond.Broadcast()
		return nil
	}
	st := c.streams[f.StreamID]
	if st == nil {
		if f.StreamID > c.lastID {
			return connError{http2.ErrCodeProtocol, "WINDOW_UPDATE on an idle stream"}
		}
		return nil // a stream that ended
	}
	if st.sendWindow+inc > maxWindow {
		st.resetLocked(errStreamFlow)
		c.queueResetLocked(st.id, http2.ErrCodeFlowControl)
		c.afterResetLocked()
		return nil
	}
	st.sendWindow += inc
	c.cond.Broadcast()
	return nil
}

// afterResetLocked flushes a reset queued under c.mu once it is
// released.
func (c *conn) afterResetLocked() {
	if c.startFlushLocked() {
		go c.flush()
	}
}

func (c *conn) rstStream(f *http2.RSTStreamFrame) error {
	c.mu.Lock()
	st := c.streams[f.StreamID]
	if st == nil && f.StreamID > c.lastID {
		c.mu.Unlock()
		return connError{http2.ErrCodeProtocol, "RST_STREAM on an idle stream"}
	}
	if st == nil {
		c.mu.Unlock()
		return nil
	}
	running := !st.handlerDone
	st.resetLocked(errStreamReset)
	st.sentEnd = true // nothing more is sent on it
	c.mu.Unlock()
	if running && !c.budget.take(time.Now()) {
		return connError{http2.ErrCodeEnhanceYourCalm, "too many streams reset"}
	}
	return nil
}

func (c *conn) data(f *http2.DataFrame) error {
	n := int64(f.Length) // flow control counts the padding too
	c.mu.Lock()
	if n > c.recvWindow {
		c.mu.Unlock()
		return connError{http2.ErrCodeFlowControl, "DATA beyond the connection's window"}
	}
	c.recvWindow -= n
	st := c.streams[f.StreamID]
	if st == nil || st.body == nil || st.body.ended || st.body.err != nil {
		if st == nil && f.StreamID > c.lastID {
			c.mu.Unlock()
			return connError{http2.ErrCodeProtocol, "DATA on an idle stream"}
		}
		// A stream that ended or was reset: its bytes count against the
		// connection, which gets them back at once.
		c.giveBackLocked(nil, n)
		closed := st != nil && !st.resetSent && (st.body == nil || st.body.ended)
		c.mu.Unlock()
		c.flushAsync()
		if closed {
			return c.streamError(f.StreamID, http2.ErrCodeStreamClosed)
		}
		return nil
	}
	b := st.body
	if n > b.window {
		st.resetLocked(errStreamFlow)
		c.queueResetLocked(st.id, http2.ErrCodeFlowControl)
		st.resetSent = true
		c.giveBackLocked(nil, n)
		c.mu.Unlock()
		c.flushAsync()
		return nil
	}
	b.window -= n
	if !b.appendLocked(f.Data()) {
		c.mu.Unlock()
		return c.streamError(st.id, http2.ErrCodeProtocol)
	}
	if b.closed {
		c.giveBackLocked(nil, n)
	} else if pad := n - int64(len(f.Data())); pad > 0 {
		c.giveBackLocked(st, pad)
	}
	if f.StreamEnded() {
		b.endLocked()
	}
	b.notifyLocked()
	c.mu.Unlock()
	c.flushAsync()
	return nil
}

// giveBackLocked returns n consumed bytes to the connection's window and
// st's (nil: the connection's only), sending WINDOW_UPDATE once a
// quarter of a window is due.
func (c *conn) giveBackLocked(st *stream, n int64) {
	c.recvUnsent += n
	if c.recvUnsent >= connWindow/4 {
		_ = c.fr.WriteWindowUpdate(0, uint32(c.recvUnsent))
		c.recvWindow += c.recvUnsent
		c.recvUnsent = 0
	}
	if st == nil || st.body == nil || st.body.ended || st.resetSent {
		return
	}
	b := st.body
	b.unsent += n
	if b.unsent >= streamWindow/4 {
		_ = c.fr.WriteWindowUpdate(st.id, uint32(b.unsent))
		b.window += b.unsent
		b.unsent = 0
	}
}

// streamError resets one stream and goes on with the connection.
func (c *conn) streamError(id uint32, code http2.ErrCode) error {
	c.mu.Lock()
	if st := c.streams[id]; st != nil {
		st.resetLocked(errStreamProtocol)
		st.resetSent = true
		st.sentEnd = true
	}
	c.queueResetLocked(id, code)
	c.afterResetLocked()
	c.mu.Unlock()
	return nil
}
