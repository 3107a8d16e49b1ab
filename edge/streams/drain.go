package streams

import (
	"errors"
	"net"
	"syscall"
)

// errDrained ends a drain: nothing more is waiting in memory or in the
// kernel. It is temporary to crypto/tls (a net.Error whose Temporary is
// true), so TLS keeps a record it has begun and the connection stays
// usable; it never leaves this package.
var errDrained error = drainedError{}

type drainedError struct{}

func (drainedError) Error() string   { return "streams: nothing more waiting" }
func (drainedError) Timeout() bool   { return true }
func (drainedError) Temporary() bool { return true }

var _ net.Error = drainedError{}

// drainReader sits under TLS on the reading side. Normally it reads the
// socket as TLS asks (blocking, straight into TLS's buffer, so an idle
// stream holds no buffer of ours). While draining, it never blocks: it
// takes whatever the kernel holds in one system call of up to 256 KiB,
// serves TLS from that, and answers errDrained when there is nothing.
// Bytes it holds are served before any blocking read, so data that has
// arrived never waits behind one.
type drainReader struct {
	net.Conn
	draining bool
	raw      syscall.RawConn // nil: the connection cannot be read without blocking
	rawTried bool
	buf      *[]byte
	r, w     int
}

func (d *drainReader) Read(p []byte) (int, error) {
	if d.buf != nil {
		return d.fromBuffer(p), nil
	}
	if !d.draining {
		return d.Conn.Read(p)
	}
	raw := d.rawConn()
	if raw == nil {
		return 0, errDrained
	}
	buf := buffers.Get().(*[]byte)
	n, err := readNow(raw, *buf)
	if n == 0 {
		buffers.Put(buf)
		if err == nil {
			err = errDrained
		}
		return 0, err
	}
	d.buf, d.r, d.w = buf, 0, n
	return d.fromBuffer(p), nil
}

func (d *drainReader) fromBuffer(p []byte) int {
	n := copy(p, (*d.buf)[d.r:d.w])
	d.r += n
	if d.r == d.w {
		buffers.Put(d.buf)
		d.buf = nil
	}
	return n
}

// rawConn finds the socket under the connection once, after the handshake
// (the edge's connection gives its socket up only once its peeked byte has
// been read).
func (d *drainReader) rawConn() syscall.RawConn {
	if !d.rawTried {
		d.rawTried = true
		if sc, ok := d.Conn.(syscall.Conn); ok {
			if raw, err := sc.SyscallConn(); err == nil {
				d.raw = raw
			}
		}
	}
	return d.raw
}

// drain reads from c into b[n:] without blocking, as long as a whole TLS
// record still fits, and returns the new fill. Its error is nil when
// nothing more was waiting.
func (c *Conn) drain(b []byte, n int) (int, error) {
	c.in.draining = true
	defer func() { c.in.draining = false }()
	for len(b)-n >= maxRecord {
		m, err := c.Read(b[n:])
		n += m
		if errors.Is(err, errDrained) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
