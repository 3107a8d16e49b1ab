package httprule

import (
	"errors"
	"io"
	"net"
	"syscall"
)

// MaxSends bounds how often one request is sent: the first time and at
// most one replay per dead connection found on the way, twice.
const MaxSends = 3

// Replay reports whether a request whose send failed may be sent again on
// another connection. Only a request that never reached the upstream
// may: the connection refused its very first byte (it was found closed
// before anything was written to it: a channel of a session that ended, a
// connection the peer had reset). Whatever its method, such a request was
// never seen, so it is safe to send, POSTs included.
//
// A request of which any byte was written is never sent again, not even
// a GET: the upstream may have acted on it, and a connection that ends
// before its answer shows nothing about whether it did. The cost is a 502
// in the rare race where a backend closes an idle keep-alive connection
// just as a request is written into it (which http.Transport would replay
// for idempotent methods); the gain is that the product never makes a
// backend run a request twice. sends counts the sends so far.
func Replay(written int64, err error, sends int) bool {
	return written == 0 && sends < MaxSends && Closed(err)
}

// Written counts the bytes a connection accepted since the last Reset:
// what Replay asks of a failed send. Each HTTP engine writes a request
// through one, so the rule reads the same count everywhere.
type Written struct {
	W io.Writer
	N int64
}

// Write writes p to W and counts what W accepted.
func (c *Written) Write(p []byte) (int, error) {
	n, err := c.W.Write(p)
	c.N += int64(n)
	return n, err
}

// Reset starts the count of a new request.
func (c *Written) Reset() { c.N = 0 }

// Closed reports whether err is a connection that was closed or reset:
// an end of stream, a reset, a broken pipe, or a use after close.
func Closed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, io.ErrClosedPipe) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// Reusable reports whether a connection may carry another request after
// an exchange: the answer was complete and delimited by its framing (an
// answer that runs until the connection closes is not), neither side
// asked to close, and no byte is left unread behind the answer (bytes the
// upstream sent unasked would be read as the next request's answer). The
// engine checks again, just before the next request, that the connection
// is still Quiet and that its Lease, if any, was not taken back.
func Reusable(complete, closing bool, unread int) bool {
	return complete && !closing && unread == 0
}

// Quiet probes an idle connection: it reports whether its peer has
// neither closed it nor sent anything since the last answer. The probe
// peeks at the socket without waiting and without consuming anything
// (recv with MSG_PEEK|MSG_DONTWAIT): one system call. (A read with a
// deadline already passed would not do: Go returns it before it reads.)
//
// A connection that is not a socket (a tunnel channel) cannot be probed
// and is taken as quiet: its owner closes it only through its Lease,
// which the engine checks as well.
func Quiet(c net.Conn) bool { return NewProber(c).Quiet() }

// Prober probes one connection for quiet (see Quiet). Made once per
// connection and kept with it, it probes without allocating.
type Prober struct {
	raw   syscall.RawConn
	peek  func(fd uintptr) bool
	quiet bool
	one   [1]byte
}

// NewProber returns the prober of c; for a connection that is not a
// socket, one that always answers quiet.
func NewProber(c net.Conn) *Prober {
	p := &Prober{}
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			p.raw = raw
		}
	}
	p.peek = p.peekFD
	return p
}

// peekFD peeks at the socket without waiting: EAGAIN (nothing to read and
// no end) is quiet; bytes sent unasked, or the peer's end (0 bytes, no
// error), are not. It never waits for readiness.
func (p *Prober) peekFD(fd uintptr) bool {
	_, _, err := syscall.Recvfrom(int(fd), p.one[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	p.quiet = errors.Is(err, syscall.EAGAIN)
	return true
}

// Quiet probes the connection now.
func (p *Prober) Quiet() bool {
	if p.raw == nil {
		return true
	}
	p.quiet = false
	return p.raw.Read(p.peek) == nil && p.quiet
}

// Lease is a kept upstream connection that its owner may take back while
// it is idle: a tunnel channel, which the edge closes when the session
// it belongs to drains. An engine that keeps such a connection for later
// requests calls Acquire before each reuse and Release after each
// complete exchange. The owner closes only an idle connection, and
// Acquire fails on one it closed, so a request is never written into a
// close that crossed it: it goes on a fresh connection instead.
type Lease interface {
	// Acquire marks the connection busy; false when the owner took it
	// back (it is closed and must not be written to).
	Acquire() bool
	// Release marks it idle again: from then on the owner may close it.
	Release()
}

// LeaseOf returns c's Lease, or nil when c has none (its owner never
// takes it back).
func LeaseOf(c net.Conn) Lease {
	if l, ok := c.(Lease); ok {
		return l
	}
	return nil
}
