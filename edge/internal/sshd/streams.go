package sshd

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/streams"
)

// streamHandshakeTimeout bounds a stream connection's TLS handshake and
// token: the agent dials it only when asked, so it comes at once or not at
// all.
const streamHandshakeTimeout = 10 * time.Second

// streamWait is how long a public connection waits for its stream before
// the session is taken as one that cannot dial them (an agent that does not
// know streams ignores the request) and a channel is opened instead.
const streamWait = 5 * time.Second

// streamPeekWindow is how long the edge waits for a connection's first
// byte before it speaks SSH first. Agents and OpenSSH send their version at
// once, and a stream client its TLS hello, so the wait ends at the first
// byte; only an SSH client that waits for the server's version line pays
// the window. A stream client slower than that (a very long round trip)
// fails its TLS handshake, and the session falls back to channels.
const streamPeekWindow = time.Second

// peekStream reads the first byte of a connection on the SSH port and
// tells whether it opens TLS: a stream connection. The byte is given back
// to whoever reads next. handshakeDeadline is restored for the SSH
// handshake.
func peekStream(c net.Conn, handshakeDeadline time.Time) (net.Conn, bool) {
	_ = c.SetReadDeadline(time.Now().Add(streamPeekWindow))
	var b [1]byte
	_, err := io.ReadFull(c, b[:])
	_ = c.SetDeadline(handshakeDeadline)
	if err != nil {
		// Silent so far (or gone): SSH, whose handshake reports it.
		return c, false
	}
	return &peekedConn{Conn: c, first: b[0], has: true}, b[0] == streams.HandshakeByte
}

// peekedConn gives back the byte peekStream read.
type peekedConn struct {
	net.Conn
	first byte
	has   bool
}

func (c *peekedConn) Read(p []byte) (int, error) {
	if c.has && len(p) > 0 {
		p[0] = c.first
		c.has = false
		return 1, nil
	}
	return c.Conn.Read(p)
}

// SyscallConn hands a stream its socket for reads that do not wait, once
// the peeked byte has been read: before that, reading the socket directly
// would skip it.
func (c *peekedConn) SyscallConn() (syscall.RawConn, error) {
	if c.has {
		return nil, errors.New("sshd: the peeked byte is still unread")
	}
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("sshd: not a socket")
	}
	return sc.SyscallConn()
}

// sessionStreams is what a session knows of its stream connections.
type sessionStreams struct {
	mu     sync.Mutex
	failed map[string]chan string // token -> why the agent could not dial it
	open   map[*streamConn]struct{}
	off    bool // the agent does not dial streams: channels only
	ended  bool
}

// usable reports whether the session should try a stream.
func (st *sessionStreams) usable() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return !st.off && !st.ended
}

// fail delivers the agent's StreamFailed.
func (st *sessionStreams) fail(payload []byte) {
	var f protocol.StreamFailed
	if json.Unmarshal(payload, &f) != nil {
		return
	}
	st.mu.Lock()
	ch := st.failed[f.Token]
	st.mu.Unlock()
	if ch != nil {
		select {
		case ch <- f.Error:
		default:
		}
	}
}

// closeAll ends every stream of the session when it ends: a revoked key or
// a closed session takes its connections with it, as it does its channels.
func (st *sessionStreams) closeAll() {
	st.mu.Lock()
	st.ended = true
	open := st.open
	st.open = nil
	st.mu.Unlock()
	for c := range open {
		_ = c.Conn.Close()
	}
}

var errStreamsOff = errors.New("the agent does not dial stream connections")

// openStream asks the agent for a stream connection for one public
// connection. When the agent says it cannot, or none comes within
// streamWait, the session falls back to channels for good.
func (ss *session) openStream(ctx context.Context, info protocol.ForwardInfo) (net.Conn, error) {
	st := &ss.streams
	token, arrived, cancel := ss.srv.cfg.Streams.Expect()
	defer cancel()
	failed := make(chan string, 1)
	st.mu.Lock()
	if st.failed == nil {
		st.failed = map[string]chan string{}
	}
	st.failed[token] = failed
	st.mu.Unlock()
	defer func() {
		st.mu.Lock()
		delete(st.failed, token)
		st.mu.Unlock()
	}()
	if _, _, err := ss.conn.SendRequest(protocol.StreamRequestType, false,
		protocol.Marshal(protocol.StreamOpen{Token: token, Info: info})); err != nil {
		return nil, err
	}
	t := time.NewTimer(streamWait)
	defer t.Stop()
	select {
	case c := <-arrived:
		return ss.trackStream(c, info)
	case why := <-failed:
		ss.streamsOff("the agent could not dial a stream connection", why)
		return nil, errStreamsOff
	case <-t.C:
		ss.streamsOff("no stream connection came from the agent", streamWait.String())
		return nil, errStreamsOff
	case <-ss.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (ss *session) streamsOff(msg, detail string) {
	ss.streams.mu.Lock()
	was := ss.streams.off
	ss.streams.off = true
	ss.streams.mu.Unlock()
	if !was {
		ss.srv.log.Info(msg+"; this session's TCP connections use SSH channels", "session", ss.id, "detail", detail)
	}
}

func (ss *session) trackStream(c *streams.Conn, info protocol.ForwardInfo) (net.Conn, error) {
	sc := &streamConn{Conn: c, st: &ss.streams, remote: remoteAddr(info.RemoteAddr)}
	st := &ss.streams
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ended {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	if st.open == nil {
		st.open = map[*streamConn]struct{}{}
	}
	st.open[sc] = struct{}{}
	return sc, nil
}

// streamConn is a stream as the public side sees it: it names the public
// client as its remote end, like a channel does, and leaves the session's
// set when closed.
type streamConn struct {
	*streams.Conn
	st     *sessionStreams
	remote net.Addr
}

func (c *streamConn) RemoteAddr() net.Addr { return c.remote }

func (c *streamConn) Close() error {
	c.st.mu.Lock()
	delete(c.st.open, c)
	c.st.mu.Unlock()
	return c.Conn.Close()
}
