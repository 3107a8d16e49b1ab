// Package h2serve is the edge's own HTTP/2 server for the public HTTPS
// listener's h2 connections. It exists for what net/http's server costs
// per request on a proxy: a goroutine per response HEADERS frame, a
// select per event in the serve loop, and a flush (a TLS record and a
// system call) per answer. Here a stream's handler writes its frames
// itself, into the connection's buffer, and whichever writer finds no
// flush in flight sends everything that is ready in one write.
//
// It is built on golang.org/x/net/http2's Framer and hpack, and guards
// what the internet may do to it: connection and stream flow-control
// windows (a peer that overflows one is refused), a bound on concurrent
// streams whose slots stay taken until their handlers return (so a reset
// frees no slot early), a budget for reset and refused streams (rapid
// reset, CVE-2023-44487), a header list size limit (431) with a bound on
// the encoded block and on its CONTINUATION frames, timeouts for the
// preface, for header blocks, for idle connections, for writes to the
// client and for streams stalled on flow control, and a bound on the
// bytes that wait to be written. Request bodies are buffered only up to
// the windows the server grants.
package h2serve

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Server serves HTTP/2 connections handed to ServeConn.
type Server struct {
	// Handler serves every stream's request.
	Handler http.Handler
	// ConnContext gives a connection's context (and a function run when
	// the connection ends), as http.Server's ConnContext does.
	ConnContext func(ctx context.Context, c net.Conn) (context.Context, func())

	// ReadHeaderTimeout bounds the client's preface and each header block
	// from its first frame to its last.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes (GOAWAY) a connection without open streams.
	IdleTimeout time.Duration
	// WriteTimeout bounds each write to the client: a client that stops
	// reading is cut off.
	WriteTimeout time.Duration
	// StallTimeout resets a stream whose answer waits longer than this
	// for the client to open its flow-control window.
	StallTimeout time.Duration
	// MaxConcurrentStreams bounds a connection's streams whose handlers
	// run; default 250, as net/http's.
	MaxConcurrentStreams uint32
	// MaxHeaderListSize bounds a request's header list (RFC 9113 section
	// 6.5.2); default 1 MiB + 32 bytes per field, as net/http's.
	MaxHeaderListSize uint32

	Log *slog.Logger

	mu      sync.Mutex
	conns   map[*conn]struct{}
	closing bool
}

// Defaults.
const (
	DefaultMaxConcurrentStreams = 250
	DefaultMaxHeaderListSize    = http.DefaultMaxHeaderBytes + 32*1024 // as net/http's, plus the per-field overhead
	defaultTimeout              = 30 * time.Second

	// Windows the server grants: a connection buffers at most
	// connWindow bytes of request bodies, a stream streamWindow.
	connWindow   = 1 << 20
	streamWindow = 256 << 10

	// maxPending bounds the bytes that wait for a write to the client;
	// a writer past it waits for the write in flight.
	maxPending = 256 << 10
	// maxContinuations bounds the CONTINUATION frames of one header
	// block: a flood of small or empty ones costs a frame read each.
	maxContinuations = 64
)

func (s *Server) maxStreams() uint32 {
	if s.MaxConcurrentStreams == 0 {
		return DefaultMaxConcurrentStreams
	}
	return s.MaxConcurrentStreams
}

func (s *Server) maxHeaderList() uint32 {
	if s.MaxHeaderListSize == 0 {
		return DefaultMaxHeaderListSize
	}
	return s.MaxHeaderListSize
}

func orDefault(d time.Duration) time.Duration {
	if d <= 0 {
		return defaultTimeout
	}
	return d
}

func (s *Server) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// ServeConn serves c, whose ALPN said h2, until it ends.
func (s *Server) ServeConn(nc net.Conn) {
	ctx, done := context.Background(), func() {}
	if s.ConnContext != nil {
		ctx, done = s.ConnContext(ctx, nc)
	}
	defer done()
	c := newConn(s, nc, ctx)
	if !s.track(c) {
		_ = nc.Close()
		return
	}
	defer s.untrack(c)
	c.serve()
}

func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	if s.conns == nil {
		s.conns = map[*conn]struct{}{}
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Shutdown sends GOAWAY on every connection, lets the streams already
// taken finish, and closes each connection once it has none (or when ctx
// ends).
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		s.mu.Lock()
		left := len(s.conns)
		for c := range s.conns {
			c.goAway(http2.ErrCodeNo)
		}
		s.mu.Unlock()
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			_ = s.Close()
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Close closes every connection at once.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closing = true
	for c := range s.conns {
		_ = c.nc.Close()
	}
	s.mu.Unlock()
	return nil
}

// conn is one HTTP/2 connection. The serve goroutine reads frames; the
// streams' handlers write theirs under mu (write.go).
type conn struct {
	s      *Server
	nc     net.Conn
	ctx    context.Context
	cancel context.CancelFunc
	tls    *tls.ConnectionState
	remote string
	fr     *http2.Framer
	hdec   *hpack.Decoder

	mu   sync.Mutex
	cond *sync.Cond
	// The write side, under mu.
	pending  []byte // frames ready to be written
	spare    []byte
	flushing bool
	werr     error
	henc     *hpack.Encoder
	hbuf     bytes.Buffer
	// Flow control of what the server sends, under mu.
	sendWindow     int64
	peerInitWindow int64
	peerMaxFrame   uint32
	// Streams, under mu.
	streams    map[uint32]*stream
	running    uint32 // handlers not yet returned
	lastID     uint32 // the highest stream id taken
	goingAway  bool   // GOAWAY sent: no new stream is taken
	idleTimer  *time.Timer
	lastActive time.Time // when the last stream ended

	// Flow control of what the client sends, under mu.
	recvWindow int64 // what the client may still send on the connection
	recvUnsent int64 // consumed bytes not yet given back (WINDOW_UPDATE)

	budget resetBudget // the serve goroutine's only
}

func newConn(s *Server, nc net.Conn, ctx context.Context) *conn {
	ctx, cancel := context.WithCancel(ctx)
	c := &conn{s: s, nc: nc, ctx: ctx, cancel: cancel, remote: nc.RemoteAddr().String(),
		sendWindow: 65535, peerInitWindow: 65535, peerMaxFrame: 16384,
		streams: map[uint32]*stream{}, recvWindow: connWindow}
	if tc, ok := nc.(*tls.Conn); ok {
		st := tc.ConnectionState()
		c.tls = &st
	}
	c.cond = sync.NewCond(&c.mu)
	c.fr = http2.NewFramer(pendingWriter{c}, nc)
	c.fr.SetMaxReadFrameSize(1 << 20)
	c.henc = hpack.NewEncoder(&c.hbuf)
	c.hdec = hpack.NewDecoder(4096, nil)
	c.hdec.SetMaxStringLength(int(s.maxHeaderList()))
	c.budget = newResetBudget(s.maxStreams())
	return c
}

// errClientPreface is a connection that did not start as HTTP/2 does.
var errClientPreface = errors.New("h2serve: bad client preface")

// serve reads the connection's frames until it ends.
func (c *conn) serve() {
	defer c.close()
	if err := c.readPreface(); err != nil {
		c.s.log().Debug("h2: no preface", "remote", c.remote, "err", err)
		return
	}
	c.mu.Lock()
	_ = c.fr.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: c.s.maxStreams()},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: streamWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: c.s.maxHeaderList()},
	)
	_ = c.fr.WriteWindowUpdate(0, connWindow-65535)
	c.lastActive = time.Now()
	c.idleTimer = time.AfterFunc(c.s.IdleTimeoutOrDefault(), c.idle)
	c.mu.Unlock()
	c.flushAsync()
	first := true
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.readFailed(err)
			return
		}
		if first {
			if _, ok := f.(*http2.SettingsFrame); !ok {
				c.fail(http2.ErrCodeProtocol, "first frame is not SETTINGS")
				return
			}
			first = false
		}
		if err := c.handle(f); err != nil {
			var ce connError
			if errors.As(err, &ce) {
				c.fail(ce.code, ce.reason)
			}
			return
		}
	}
}

// IdleTimeoutOrDefault is IdleTimeout, or 120 s.
func (s *Server) IdleTimeoutOrDefault() time.Duration {
	if s.IdleTimeout <= 0 {
		return 120 * time.Second
	}
	return s.IdleTimeout
}

func (c *conn) readPreface() error {
	_ = c.nc.SetReadDeadline(time.Now().Add(orDefault(c.s.ReadHeaderTimeout)))
	var b [len(http2.ClientPreface)]byte
	if _, err := io.ReadFull(c.nc, b[:]); err != nil {
		return err
	}
	if string(b[:]) != http2.ClientPreface {
		return errClientPreface
	}
	return c.nc.SetReadDeadline(time.Time{})
}

// readFailed ends the connection after a failed read: a frame the
// framer refuses is answered with GOAWAY.
func (c *conn) readFailed(err error) {
	var ce http2.ConnectionError
	var se http2.StreamError
	switch {
	case errors.As(err, &ce):
		c.fail(http2.ErrCode(ce), "framer: "+err.Error())
	case errors.As(err, &se):
		c.fail(se.Code, "framer: "+err.Error())
	case errors.Is(err, http2.ErrFrameTooLarge):
		c.fail(http2.ErrCodeFrameSize, "frame too large")
	}
}

// connError ends the connection with GOAWAY of code.
type connError struct {
	code   http2.ErrCode
	reason string
}

func (e connError) Error() string { return "h2serve: " + e.code.String() + ": " + e.reason }

// fail sends GOAWAY with code and ends the connection.
func (c *conn) fail(code http2.ErrCode, reason string) {
	c.s.log().Debug("h2: connection error", "remote", c.remote, "code", code, "reason", reason)
	c.mu.Lock()
	c.goingAway = true
	_ = c.fr.WriteGoAway(c.lastID, code, nil)
	c.mu.Unlock()
	c.flushSync()
}

// goAway sends GOAWAY once (a drain): streams already taken go on; the
// connection closes once they end.
func (c *conn) goAway(code http2.ErrCode) {
	c.mu.Lock()
	if c.goingAway {
		closeNow := c.running == 0 && len(c.streams) == 0
		c.mu.Unlock()
		if closeNow {
			_ = c.nc.Close()
		}
		return
	}
	c.goingAway = true
	_ = c.fr.WriteGoAway(c.lastID, code, nil)
	c.mu.Unlock()
	c.flushAsync()
}

// idle runs when the idle timer fires: a connection without streams is
// told GOAWAY and closed.
func (c *conn) idle() {
	c.mu.Lock()
	idle := c.s.IdleTimeoutOrDefault()
	if c.running > 0 || len(c.streams) > 0 {
		c.idleTimer.Reset(idle)
		c.mu.Unlock()
		return
	}
	if since := time.Since(c.lastActive); since < idle {
		c.idleTimer.Reset(idle - since)
		c.mu.Unlock()
		return
	}
	c.goingAway = true
	_ = c.fr.WriteGoAway(c.lastID, http2.ErrCodeNo, nil)
	c.mu.Unlock()
	c.flushSync()
	_ = c.nc.Close()
}

// close ends every stream and the connection.
func (c *conn) close() {
	c.cancel()
	c.mu.Lock()
	if c.werr == nil {
		c.werr = net.ErrClosed
	}
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	for _, st := range c.streams {
		st.resetLocked(errConnClosed)
	}
	c.cond.Broadcast()
	c.mu.Unlock()
	_ = c.nc.Close()
}

var errConnClosed = errors.New("h2serve: connection closed")
