package h1

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"code.tuna.am/tuna/k8s-operator/internal/accept"
)

// Server accepts connections and relays their plain requests itself; it
// hands a connection whose request it does not take to Fallback, which
// serves it from that request on.
type Server struct {
	Router Router
	// Fallback serves the connections handed over. Server runs its Serve
	// and its Shutdown.
	Fallback *http.Server
	// ReadHeaderTimeout bounds the wait for a new connection's first
	// request and the reading of every head once its first byte has come;
	// IdleTimeout the wait for the next request on a kept connection.
	// Zero: no bound.
	ReadHeaderTimeout, IdleTimeout time.Duration
	// BodyTimeout bounds each wait for more of a request body (a client
	// that stalls mid-upload); ExchangeTimeout one exchange, from its head
	// to its answer's end (504 when no answer has begun). Zero: no bound:
	// long polls, streams and slow uploads are the backend's business.
	BodyTimeout, ExchangeTimeout time.Duration
	// OnAcceptRetry, if set, is told of each transient accept error (see
	// package accept).
	OnAcceptRetry func(err error, wait time.Duration)
	// TLS, if set, makes the server a TLS listener: each connection's
	// handshake is bounded by ReadHeaderTimeout; one that negotiates a
	// protocol NextProto names (ACME's TLS-ALPN challenge) is given to
	// its function, which owns it from then on; one that negotiates
	// another protocol than http/1.1 (h2) is handed to Fallback as the
	// *tls.Conn itself, so that net/http serves it by its TLSNextProto
	// (HTTP/2 when Fallback's TLSConfig names h2); the rest (http/1.1,
	// or no ALPN) is relayed as plain HTTP is, through the same rulebook.
	TLS       *tls.Config
	NextProto map[string]func(*tls.Conn)

	once sync.Once
	hand *handoff

	mu      sync.Mutex
	ln      net.Listener
	conns   map[*conn]bool // true while a request is in flight
	closing bool
	// stopping is closing, read without the lock on every answer: an
	// answer given during a shutdown says the connection closes.
	stopping atomic.Bool
}

// ErrServerClosed is what Serve returns after Shutdown or Close.
var ErrServerClosed = http.ErrServerClosed

const (
	clientBuffer   = 8 << 10
	upstreamBuffer = 16 << 10
)

var (
	clientReaders   = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, clientBuffer) }}
	upstreamReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, upstreamBuffer) }}
	writers         = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 8<<10) }}
)

// Serve accepts connections on ln until Shutdown or Close; it returns
// ErrServerClosed then, or the error that stopped the listener for good
// (transient errors, such as running out of file descriptors, are waited
// out: package accept).
func (s *Server) Serve(ln net.Listener) error {
	s.start(ln.Addr())
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = ln.Close()
		return ErrServerClosed
	}
	s.ln = ln
	s.mu.Unlock()
	err := accept.Serve(accept.Wrap(ln, s.OnAcceptRetry), s.serveConn)
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing || err == nil {
		return ErrServerClosed
	}
	return err
}

// start runs the fallback server on the hand-off listener, once.
func (s *Server) start(addr net.Addr) {
	s.once.Do(func() {
		s.hand = newHandoff(addr)
		go func() { _ = s.Fallback.Serve(s.hand) }()
	})
}

// track registers a new connection, idle; false once shutting down.
func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	if s.conns == nil {
		s.conns = map[*conn]bool{}
	}
	s.conns[c] = false
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// setActive marks c busy: a request has begun to arrive.
func (s *Server) setActive(c *conn) {
	s.mu.Lock()
	if _, ok := s.conns[c]; ok {
		s.conns[c] = true
	}
	s.mu.Unlock()
}

// setIdle marks c waiting for its next request; false when the server
// shuts down, and c must close.
func (s *Server) setIdle(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.conns[c] = false
	return true
}

// Shutdown stops accepting, closes the connections that wait for a
// request, waits for those with one in flight to finish it (or for ctx),
// then shuts the fallback server down the same way.
func (s *Server) Shutdown(ctx context.Context) error {
	s.beginClose()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		s.mu.Lock()
		for c, busy := range s.conns {
			if !busy {
				_ = c.nc.Close()
			}
		}
		left := len(s.conns)
		s.mu.Unlock()
		if left == 0 {
			break
		}
		select {
		case <-ctx.Done():
			_ = s.Fallback.Shutdown(ctx)
			return ctx.Err()
		case <-tick.C:
		}
	}
	return s.Fallback.Shutdown(ctx)
}

// Close closes the listener and every connection at once.
func (s *Server) Close() error {
	s.beginClose()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.nc.Close()
	}
	s.mu.Unlock()
	return s.Fallback.Close()
}

func (s *Server) beginClose() {
	s.start(nil)
	s.mu.Lock()
	s.closing = true
	s.stopping.Store(true)
	ln := s.ln
	s.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
	// Closing the hand-off listener is the fallback server's to do in its
	// own Shutdown or Close; a connection handed over after that is closed.
}

// handshake runs a TLS connection's handshake within ReadHeaderTimeout.
// It returns the connection to relay, or false when there is none: the
// handshake failed, or the connection went to a NextProto function.
func (s *Server) handshake(nc net.Conn) (*tls.Conn, bool) {
	tc := tls.Server(nc, s.TLS)
	if d := s.ReadHeaderTimeout; d > 0 {
		_ = nc.SetDeadline(time.Now().Add(d))
	}
	if err := tc.Handshake(); err != nil {
		// As net/http logs it, to the same log: a refused certificate
		// (an SNI name the edge does not serve) is worth a line there.
		if l := s.Fallback.ErrorLog; l != nil {
			l.Printf("http: TLS handshake error from %s: %v", nc.RemoteAddr(), err)
		}
		_ = nc.Close()
		return nil, false
	}
	_ = nc.SetDeadline(time.Time{})
	switch proto := tc.ConnectionState().NegotiatedProtocol; {
	case s.NextProto[proto] != nil:
		s.NextProto[proto](tc)
	case proto != "" && proto != "http/1.1":
		s.hand.give(tc, nil)
	default:
		return tc, true
	}
	return nil, false
}

// DirectReader is a connection that can be read without what its Read
// does to honour deadlines: an SSH channel's background reader, which
// costs a goroutine hand-off and a copy per read. The relay reads
// upstream connections, on which it sets no deadline, through it, and
// client connections too when it has no timeouts (the agent's channels).
type DirectReader interface {
	DirectReader() (io.Reader, bool)
}

// readerOf is nc's direct reader and true, or nc and false.
func readerOf(nc net.Conn) (io.Reader, bool) {
	if d, ok := nc.(DirectReader); ok {
		if r, ok := d.DirectReader(); ok {
			return r, true
		}
	}
	return nc, false
}

// serveConn relays requests on nc until one is not the relay's, or the
// connection ends.
func (s *Server) serveConn(nc net.Conn) {
	if s.TLS != nil {
		tc, ok := s.handshake(nc)
		if !ok {
			return
		}
		nc = tc
	}
	c := &conn{s: s, nc: nc, remote: nc.RemoteAddr().String()}
	if !s.track(c) {
		_ = nc.Close()
		return
	}
	c.br = clientReaders.Get().(*bufio.Reader)
	if s.ReadHeaderTimeout <= 0 && s.IdleTimeout <= 0 && s.BodyTimeout <= 0 {
		c.direct, _ = readerOf(nc)
		c.br.Reset(c.direct)
	} else {
		c.br.Reset(nc)
	}
	handed := false
	defer func() {
		s.untrack(c)
		c.dropAll()
		if !handed {
			if c.linger {
				c.closeLingering()
			}
			_ = nc.Close()
			c.stopWatch()
			c.br.Reset(nil)
			clientReaders.Put(c.br)
		}
		// A handed-over reader is dropped by its connection once empty.
	}()
	for first := true; ; first = false {
		err := c.readRequest(first)
		var rt Route
		ok := err == nil
		if ok {
			rt, ok = s.Router.Route(&c.req, c.remote)
		}
		if err == nil && !ok || errors.Is(err, errNotSimple) {
			// The reader goes with the connection: it holds the head.
			handed = true
			s.untrack(c)
			c.dropAll()
			s.hand.give(nc, c.br)
			return
		}
		if errors.Is(err, errBothFramings) {
			c.refuse(http.StatusBadRequest, "tuna: a request may not carry both Content-Length and Transfer-Encoding")
			return
		}
		if err != nil || !c.relay(&rt) || !s.setIdle(c) {
			return
		}
	}
}
