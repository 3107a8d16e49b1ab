// Package accept is the one accept policy of the product's listeners:
// net/http's servers, the h1 relay, the edge's SSH server and its TCP
// endpoint ports all accept through Listener or Serve, so none gives up a
// port on an error that passes, and none spins on one.
//
// An error that passes with time (out of file descriptors, a connection
// reset before it was accepted) is waited out, with a back-off from 5 ms
// to 1 s, and reported to OnRetry; any other error ends the loop and is
// returned, for the caller to report as a listener that stopped for good
// (the edge fails /healthz then).
package accept

import (
	"errors"
	"net"
	"os"
	"syscall"
	"time"
)

// Back-off bounds while accepting fails with a transient error.
const (
	minWait = 5 * time.Millisecond
	maxWait = time.Second
)

// Transient reports whether an accept error passes with time: the
// process or the system is out of file descriptors or memory, a
// connection ended before it was accepted, or a network error that Linux
// passes on from the pending connection (accept(2): to be treated like
// EAGAIN), or a firewall refused it (EPERM).
func Transient(err error) bool {
	for _, errno := range []syscall.Errno{
		syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR, syscall.EAGAIN, syscall.EPERM,
		syscall.ENETDOWN, syscall.EPROTO, syscall.ENOPROTOOPT, syscall.EHOSTDOWN, syscall.ENONET,
		syscall.EHOSTUNREACH, syscall.EOPNOTSUPP, syscall.ENETUNREACH,
	} {
		if errors.Is(err, errno) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
}

// Listener is a listener whose Accept waits out transient errors.
type Listener struct {
	net.Listener
	// OnRetry, if set, is told of each transient error and how long the
	// loop waits before it accepts again.
	OnRetry func(err error, wait time.Duration)
	// sleep waits; tests shorten it.
	sleep func(time.Duration)
}

// Wrap returns ln accepting with the shared policy.
func Wrap(ln net.Listener, onRetry func(err error, wait time.Duration)) *Listener {
	return &Listener{Listener: ln, OnRetry: onRetry}
}

// Accept returns the next connection, or net.ErrClosed (wrapped) once the
// listener is closed, or an error that will not pass.
func (l *Listener) Accept() (net.Conn, error) {
	var wait time.Duration
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			return c, nil
		}
		if errors.Is(err, net.ErrClosed) || !Transient(err) {
			return nil, err
		}
		wait = min(max(2*wait, minWait), maxWait)
		if l.OnRetry != nil {
			l.OnRetry(err, wait)
		}
		if l.sleep != nil {
			l.sleep(wait)
		} else {
			time.Sleep(wait)
		}
	}
}

// Serve accepts on l until it is closed, running handle for each
// connection in a goroutine of its own. It returns nil once l is closed,
// or the error that stopped it for good.
func Serve(l *Listener, handle func(net.Conn)) error {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go handle(c)
	}
}
