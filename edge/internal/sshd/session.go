package sshd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/internal/third_party/xcrypto/ssh"

	"code.tuna.am/tuna/k8s-operator/edge/chanconn"
	"code.tuna.am/tuna/k8s-operator/edge/internal/auth"
	"code.tuna.am/tuna/k8s-operator/edge/internal/registry"
	"code.tuna.am/tuna/k8s-operator/edge/metrics"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/internal/connio"
)

// terminateAckTimeout bounds how long Terminate waits for the agent to
// acknowledge the reason before the connection is closed anyway. Waiting at
// all matters: closing right after writing can reset the TCP connection and
// lose the message.
const terminateAckTimeout = 2 * time.Second

// session is one authenticated agent connection.
type session struct {
	srv       *Server
	conn      *ssh.ServerConn
	p         *auth.Principal
	id        string
	remote    string
	connected time.Time
	done      chan struct{}
	termOnce  sync.Once
	chans     registry.Slots // open forward channels
	fwd       forwards       // the same, for a drain to take back
	// draining: the agent asked for no new public connections; they go to
	// the other sessions of its pool while it finishes what it carries.
	draining atomic.Bool
	// left: the session is out of its pools and opens no new connection.
	left atomic.Bool
	// frames: the agent serves framed channels (protocol.FeatureHTTPFrames).
	frames  atomic.Bool
	streams sessionStreams
	// answers keeps the replies to the agent's requests in order while a
	// bind waits for the store off the session's loop (answers.go).
	answers answers
	// What the agent sends, which its watcher waits on (watch.go); chans
	// (newChans) is nil once closed. Only the goroutine serving the session, or its
	// watcher, uses them.
	newChans      <-chan ssh.NewChannel
	reqs          <-chan *ssh.Request
	watcher       *watcher
	pend          *pendingAuth
	stopKeepalive func()

	// The addresses it binds, and the TCP endpoints' ports it serves (nil
	// until it binds one): an agent's session binds one address or a few,
	// and a slice of one costs an idle session less than a map (a map's
	// first group holds eight).
	mu    sync.Mutex
	binds []boundAddr
	ports map[int]*registry.Pool
}

// boundAddr is one address a session binds: resolved address, reply.
type boundAddr struct {
	addr  string
	reply protocol.BindReply
}

func newSession(s *Server, sc *ssh.ServerConn, p *auth.Principal, id string) *session {
	return &session{
		srv: s, conn: sc, p: p, id: id,
		remote:    sc.RemoteAddr().String(),
		connected: time.Now().UTC(),
		done:      make(chan struct{}),
	}
}

func (ss *session) ID() string             { return ss.id }
func (ss *session) KeyID() string          { return ss.p.ID }
func (ss *session) RemoteAddr() string     { return ss.remote }
func (ss *session) ConnectedAt() time.Time { return ss.connected }
func (ss *session) Load() int              { return ss.chans.InUse() }
func (ss *session) Draining() bool         { return ss.draining.Load() }

// TunnelKey is the session's tunnel key's owner and labels, for the
// API's list of sessions (registry.Keyed); ok is false for an API key.
func (ss *session) TunnelKey() (owner string, labels map[string]string, ok bool) {
	if tk := ss.p.Tunnel; tk != nil {
		return tk.Owner, tk.Labels, true
	}
	return "", nil, false
}

// end takes the session down once its connection is gone (its requests
// ended): the session leaves the table (releasing its key's place in the
// pool) before done closes, so whoever waits on done, such as a
// revocation, sees it gone. The reserved ports stay with the edge; a
// port's listener is detached only when this was the last session of its
// pool.
func (ss *session) end() {
	ss.stopKeepalive()
	_ = ss.conn.Close()
	ss.answers.wait() // a bind in flight is in the table before the session leaves it
	ss.streams.closeAll()
	ss.srv.reg.Remove(ss.id)
	ss.mu.Lock()
	for p, pool := range ss.ports {
		if pool.Len() == 0 {
			ss.srv.cfg.Ports.Detach(p, pool.ID())
		}
	}
	ss.mu.Unlock()
	close(ss.done)
}

// alive reports whether the agent answers a keepalive within timeout.
func (ss *session) alive(timeout time.Duration) bool {
	select {
	case <-ss.done:
		return false
	default:
	}
	res := make(chan error, 1)
	go func() {
		ok, _, err := ss.conn.SendRequest(protocol.KeepaliveRequestType, true, nil)
		if err == nil && !ok {
			err = errors.New("keepalive refused")
		}
		res <- err
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-res:
		return err == nil
	case <-t.C:
		return false
	case <-ss.done:
		return false
	}
}

// keepalive pings the agent every interval and drops the connection when
// it stops answering, so a vanished agent frees its key and addresses
// promptly. It runs on a timer: between pings the session costs no
// goroutine for it, and a ping costs one, which waits for the reply while
// a second timer closes the connection if the reply is late (closing ends
// the wait). The first ping comes after a random part of the interval, at
// least half: sessions opened together (every agent reconnecting to an
// edge that restarted) would otherwise ping together for their whole
// lives, and each burst leaves the runtime a goroutine for each session
// pinging at once. stop ends it.
func (ss *session) keepalive() (stop func()) {
	interval, timeout := ss.srv.cfg.KeepaliveInterval, ss.srv.cfg.KeepaliveTimeout
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	tick := func() {
		late := time.AfterFunc(timeout, func() {
			ss.srv.log.Info("closing unresponsive session", "session", ss.id, "err", fmt.Sprintf("no keepalive reply within %s", timeout))
			_ = ss.conn.Close()
		})
		_, _, err := ss.conn.SendRequest(protocol.KeepaliveRequestType, true, nil)
		if !late.Stop() {
			return // closed for want of a reply
		}
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		if err != nil {
			ss.srv.log.Info("closing unresponsive session", "session", ss.id, "err", err)
			_ = ss.conn.Close()
			return
		}
		t.Reset(interval)
	}
	mu.Lock()
	t = time.AfterFunc(interval-rand.N(interval/2+1), tick)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// Terminate takes the session out of the table, tells the agent why it
// ends, closes it and waits until it has ended, so that when a revocation
// call returns the key's session is gone.
func (ss *session) Terminate(code, reason string) {
	ss.termOnce.Do(func() {
		// Out of the table first: once the agent hears why its session
		// ends, nothing is routed to it any more (a host that was only
		// its own answers 404 at once, not 502 until the connection is
		// gone). run's own Remove then finds nothing left to do.
		ss.srv.reg.Remove(ss.id)
		payload := protocol.Marshal(protocol.Terminate{Code: code, Reason: reason})
		acked := make(chan struct{})
		go func() {
			_, _, _ = ss.conn.SendRequest(protocol.TerminateRequestType, true, payload)
			close(acked)
		}()
		t := time.NewTimer(terminateAckTimeout)
		select {
		case <-acked:
		case <-t.C:
		case <-ss.done:
		}
		t.Stop()
		_ = ss.conn.Close()
		ss.srv.log.Info("session terminated", "session", ss.id, "code", code, "reason", reason)
	})
	<-ss.done
}

// OpenForward opens one channel for one public connection. Over the
// session's channel limit it fails at once with a *registry.LimitError.
// The connection is a Lease (httprule.Lease): busy until released after
// an exchange, so a drain takes back only idle ones.
func (ss *session) OpenForward(ctx context.Context, info protocol.ForwardInfo) (net.Conn, error) {
	if ss.left.Load() {
		// Picked just before it left: the pool tries its next session.
		return nil, fmt.Errorf("tunnel session %s has left its pools: %w", ss.id, net.ErrClosed)
	}
	if limit := ss.srv.cfg.Limits.ChannelsPerSession; !ss.chans.Take(limit) {
		ss.srv.m.LimitRefused(metrics.LimitChannelsPerSession)
		return nil, &registry.LimitError{Limit: metrics.LimitChannelsPerSession, Value: limit,
			What: fmt.Sprintf("tunnel session %s has too many open connections", ss.id)}
	}
	info.Framed = info.Framed && ss.frames.Load()
	c, err := ss.openStreamOrChannel(ctx, info)
	if err != nil {
		ss.chans.Put()
		return nil, err
	}
	f := &forward{Conn: c, ss: ss, framed: info.Framed}
	ss.srv.m.Channel(1)
	if !ss.track(f) {
		_ = f.Close()
		return nil, net.ErrClosed
	}
	return f, nil
}

// forward is one public connection's channel (or stream) on the session.
// It gives its slot back when closed, once, and is a Lease: a connection
// kept for the next request between exchanges is idle, and a draining
// session closes its idle ones itself (and each busy one as it is
// released), so that no request is ever written into a channel that the
// agent closed at the same moment. The agent, for its part, never closes
// a kept channel while it drains: it waits for the edge to.
type forward struct {
	net.Conn
	ss     *session
	state  atomic.Int32
	once   sync.Once
	framed bool
}

// Framed reports whether the channel carries frames: the public side
// asked for them (ForwardInfo.Framed) and the agent serves them.
func (c *forward) Framed() bool { return c.framed }

// States of a forward connection.
const (
	forwardBusy int32 = iota
	forwardIdle
	forwardTaken
)

// Acquire marks an idle connection busy; false once the session took it
// back.
func (c *forward) Acquire() bool { return c.state.CompareAndSwap(forwardIdle, forwardBusy) }

// Release marks it idle; a draining session takes it back at once.
func (c *forward) Release() {
	if c.state.CompareAndSwap(forwardBusy, forwardIdle) && c.ss.draining.Load() {
		c.takeBack()
	}
}

// takeBack closes the connection if it is idle.
func (c *forward) takeBack() {
	if c.state.CompareAndSwap(forwardIdle, forwardTaken) {
		_ = c.Close()
	}
}

func (c *forward) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.ss.untrack(c)
		c.ss.chans.Put()
		c.ss.srv.m.Channel(-1)
	})
	return err
}

// WriteTo and ReadFrom let io.Copy use the connection's own copy (a
// channel read in place, a stream's large buffers).
func (c *forward) WriteTo(w io.Writer) (int64, error)  { return connio.WriteTo(c.Conn, w) }
func (c *forward) ReadFrom(r io.Reader) (int64, error) { return connio.ReadFrom(c.Conn, r) }

// DirectReader passes a channel's direct reader on, for the h1 relay.
func (c *forward) DirectReader() (io.Reader, bool) { return connio.DirectReaderOf(c.Conn) }

// CloseWrite passes half-closes through (see Pipe).
func (c *forward) CloseWrite() error {
	if cw, ok := c.Conn.(closeWriter); ok {
		return cw.CloseWrite()
	}
	return nil
}

// leave takes a draining session out of its pools once every address it
// serves has another live member that is not draining; it reports whether
// it did. A connection the pool picked just before opens nothing
// (OpenForward), and the pool tries its next session.
func (ss *session) leave() bool {
	if !ss.draining.Load() || !ss.srv.reg.OthersServe(ss.id) {
		return false
	}
	ss.left.Store(true)
	ss.srv.reg.Remove(ss.id)
	ss.srv.log.Info("session left its pools", "session", ss.id)
	return true
}

// openStreamOrChannel carries a TCP endpoint's connection on a stream
// when the edge and the agent can, and on a channel otherwise. HTTP stays
// on channels: its connections are many and short, where a channel opens
// in one round trip and a stream needs a TLS handshake.
func (ss *session) openStreamOrChannel(ctx context.Context, info protocol.ForwardInfo) (net.Conn, error) {
	tcp := info.Host == ""
	if tcp && ss.srv.cfg.Streams != nil && ss.streams.usable() {
		c, err := ss.openStream(ctx, info)
		if err == nil {
			ss.srv.m.TCPForward(metrics.TransportStream)
			return c, nil
		}
		if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
			return nil, err
		}
	}
	c, err := ss.openForward(ctx, info)
	if err == nil && tcp {
		ss.srv.m.TCPForward(metrics.TransportChannel)
	}
	return c, err
}

// forwards is a session's open forward connections.
type forwards struct {
	mu   sync.Mutex
	open map[*forward]struct{}
}

// track adds f to the session's set; false when the session has ended.
func (ss *session) track(f *forward) bool {
	fs := &ss.fwd
	fs.mu.Lock()
	defer fs.mu.Unlock()
	select {
	case <-ss.done:
		return false
	default:
	}
	if fs.open == nil {
		fs.open = map[*forward]struct{}{}
	}
	fs.open[f] = struct{}{}
	return true
}

func (ss *session) untrack(f *forward) {
	ss.fwd.mu.Lock()
	delete(ss.fwd.open, f)
	ss.fwd.mu.Unlock()
}

// drain marks the session draining and takes back its idle connections;
// busy ones are taken back as they are released. New public connections
// go to the pool's other sessions (registry.Pool.Pick).
func (ss *session) drain() {
	if !ss.draining.Swap(true) {
		ss.srv.log.Info("session draining", "session", ss.id)
	}
	ss.fwd.mu.Lock()
	open := make([]*forward, 0, len(ss.fwd.open))
	for f := range ss.fwd.open {
		open = append(open, f)
	}
	ss.fwd.mu.Unlock()
	for _, f := range open {
		f.takeBack()
	}
}

func (ss *session) openForward(ctx context.Context, info protocol.ForwardInfo) (net.Conn, error) {
	type result struct {
		ch   ssh.Channel
		reqs <-chan *ssh.Request
		err  error
	}
	r := make(chan result, 1)
	go func() {
		ch, reqs, err := ss.conn.OpenChannel(protocol.ForwardChannelType, protocol.Marshal(info))
		r <- result{ch, reqs, err}
	}()
	select {
	case res := <-r:
		if res.err != nil {
			return nil, fmt.Errorf("opening tunnel channel on session %s: %w", ss.id, res.err)
		}
		go ssh.DiscardRequests(res.reqs)
		return chanconn.New(res.ch, ss.conn.LocalAddr(), remoteAddr(info.RemoteAddr)), nil
	case <-ctx.Done():
		// The agent may still accept later: close that channel then.
		go func() {
			if res := <-r; res.err == nil {
				go ssh.DiscardRequests(res.reqs)
				_ = res.ch.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

func remoteAddr(s string) net.Addr {
	ra, err := net.ResolveTCPAddr("tcp", s)
	if err != nil {
		return &net.TCPAddr{}
	}
	return ra
}
