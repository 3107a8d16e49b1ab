// Package chanconn makes an SSH channel a full net.Conn, with working read
// deadlines. Deadlines matter: net/http's server interrupts its background
// read with SetReadDeadline(past) after every request and would hang on a
// connection that ignores it.
package chanconn

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"

	"code.tuna.am/tuna/k8s-operator/internal/bufpool"
)

// bufMax bounds how far the background reader runs ahead of Read; the SSH
// window already bounds what the peer may send.
const bufMax = 64 << 10

// keepMax bounds the buffer a drained Conn keeps for what arrives next: a
// request or an answer head fits, so the background reader does not
// allocate for each message of a keep-alive connection; a larger buffer
// (a body) goes back to the garbage collector.
const keepMax = 4 << 10

// Conn is a net.Conn over an ssh.Channel.
type Conn struct {
	ch            ssh.Channel
	local, remote net.Addr

	mu  sync.Mutex
	buf []byte
	// store is the array buf is a slice of, kept for the next data once
	// buf is drained (up to keepMax).
	store   []byte
	rerr    error
	data    chan struct{} // signalled when buf grows or rerr is set
	space   chan struct{} // signalled when buf shrinks
	closed  chan struct{}
	once    sync.Once
	rd      *deadline
	wd      *deadline
	started sync.Once
	// pumping is set once the background reader runs.
	pumping atomic.Bool
}

// New wraps ch; local and remote are what LocalAddr/RemoteAddr report.
func New(ch ssh.Channel, local, remote net.Addr) *Conn {
	return &Conn{
		ch: ch, local: local, remote: remote,
		data:   make(chan struct{}, 1),
		space:  make(chan struct{}, 1),
		closed: make(chan struct{}),
		rd:     newDeadline(),
		wd:     newDeadline(),
	}
}

// Channel returns the underlying SSH channel.
func (c *Conn) Channel() ssh.Channel { return c.ch }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// pump reads the channel in the background so that Read can give up at a
// deadline without losing data: whatever arrives stays in buf.
func (c *Conn) pump() {
	tmp := make([]byte, 32<<10)
	for {
		n, err := c.ch.Read(tmp)
		c.mu.Lock()
		if len(c.buf) == 0 {
			c.buf = c.store[:0]
		}
		if before := cap(c.buf); len(c.buf)+n > before {
			c.buf = append(c.buf, tmp[:n]...)
			c.store = c.buf // a new array, which buf starts
		} else {
			c.buf = append(c.buf, tmp[:n]...)
		}
		if err != nil {
			c.rerr = err
		}
		full := len(c.buf) >= bufMax
		c.mu.Unlock()
		signal(c.data)
		if err != nil {
			return
		}
		for full {
			select {
			case <-c.space:
			case <-c.closed:
				return
			}
			c.mu.Lock()
			full = len(c.buf) >= bufMax
			c.mu.Unlock()
		}
	}
}

func (c *Conn) Read(p []byte) (int, error) {
	c.started.Do(func() { c.pumping.Store(true); go c.pump() })
	for {
		select {
		case <-c.closed:
			return 0, net.ErrClosed
		default:
		}
		c.mu.Lock()
		if len(c.buf) > 0 {
			n := copy(p, c.buf)
			c.buf = c.buf[n:]
			if len(c.buf) == 0 {
				c.buf = nil
				if cap(c.store) > keepMax {
					c.store = nil
				}
			}
			c.mu.Unlock()
			signal(c.space)
			return n, nil
		}
		if c.rerr != nil {
			err := c.rerr
			c.mu.Unlock()
			return 0, err
		}
		c.mu.Unlock()
		select {
		case <-c.data:
		case <-c.rd.wait():
			return 0, os.ErrDeadlineExceeded
		case <-c.closed:
			return 0, net.ErrClosed
		}
	}
}

// WriteTo copies the channel to w until EOF: io.Copy calls it for the
// byte pipes of TCP tunnels. When nothing has read from the Conn yet, it
// reads the channel directly, without the background reader and its extra
// copy of every byte (17 % of the edge's CPU in a TCP echo profile); read
// deadlines do not apply to it then. Once it returns, Read returns what
// ended it. Otherwise (Read ran, the background reader holds data) it
// copies through Read.
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	direct := false
	c.started.Do(func() { direct = true })
	if !direct {
		return io.Copy(w, readerOnly{c})
	}
	buf := bufpool.Shared.Get()
	defer bufpool.Shared.Put(buf)
	var n int64
	end := func(err error) (int64, error) {
		c.mu.Lock()
		c.rerr = err
		if c.rerr == nil {
			c.rerr = io.EOF
		}
		c.mu.Unlock()
		signal(c.data)
		return n, err
	}
	for {
		nr, er := c.ch.Read(buf)
		if nr > 0 {
			nw, ew := w.Write(buf[:nr])
			n += int64(nw)
			if ew == nil && nw != nr {
				ew = io.ErrShortWrite
			}
			if ew != nil {
				return end(ew)
			}
		}
		if er == nil {
			continue
		}
		select {
		case <-c.closed: // closed here, not an EOF of the peer
			return end(net.ErrClosed)
		default:
		}
		if errors.Is(er, io.EOF) {
			return end(nil)
		}
		return end(er)
	}
}

// DirectReader returns the channel itself to read from, without the
// background reader and its copy of every byte, while nothing has read
// through Read: the h1 relay reads channels through it, as WriteTo does,
// since it sets no read deadline on them (none applies to these reads).
// The caller must stop reading it before anything calls Read, which
// then starts the background reader for good.
func (c *Conn) DirectReader() (io.Reader, bool) {
	if c.pumping.Load() {
		return nil, false
	}
	return c.ch, true
}

// readerOnly hides WriteTo, so that io.Copy in WriteTo uses Read.
type readerOnly struct{ io.Reader }

// Write blocks while the peer's window is full; a write deadline only
// refuses writes started after it passed (SSH writes cannot be interrupted
// short of closing the channel).
func (c *Conn) Write(p []byte) (int, error) {
	select {
	case <-c.wd.wait():
		return 0, os.ErrDeadlineExceeded
	case <-c.closed:
		return 0, net.ErrClosed
	default:
	}
	return c.ch.Write(p)
}

// CloseWrite sends EOF to the peer, keeping the read side open.
func (c *Conn) CloseWrite() error { return c.ch.CloseWrite() }

// Close closes the channel.
func (c *Conn) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		close(c.closed)
		err = c.ch.Close()
		if errors.Is(err, io.EOF) {
			err = nil
		}
	})
	return err
}

func (c *Conn) LocalAddr() net.Addr  { return c.local }
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

func (c *Conn) SetDeadline(t time.Time) error {
	c.rd.set(t)
	c.wd.set(t)
	return nil
}
func (c *Conn) SetReadDeadline(t time.Time) error  { c.rd.set(t); return nil }
func (c *Conn) SetWriteDeadline(t time.Time) error { c.wd.set(t); return nil }

// deadline is a channel that is closed when the deadline passes; setting a
// new deadline replaces it.
type deadline struct {
	mu    sync.Mutex
	timer *time.Timer
	ch    chan struct{}
}

func newDeadline() *deadline { return &deadline{ch: make(chan struct{})} }

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	select {
	case <-d.ch: // expired earlier: the new deadline needs a fresh channel
		d.ch = make(chan struct{})
	default:
	}
	if t.IsZero() {
		return
	}
	dur := time.Until(t)
	if dur <= 0 {
		close(d.ch)
		return
	}
	ch := d.ch
	d.timer = time.AfterFunc(dur, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.ch == ch {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
	})
}

func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ch
}
