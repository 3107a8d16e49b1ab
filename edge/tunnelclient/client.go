// Package tunnelclient is the agent's side of the tunnel transport: it dials
// tuna-edge over SSH with a key, pins the edge's host key, binds a public
// address and hands out one net.Conn per public connection.
package tunnelclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"

	"code.tuna.am/tuna/k8s-operator/edge/chanconn"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/internal/coalesce"
)

// acceptQueue bounds public connections waiting for Accept; beyond it the
// edge is told to try later (its client sees a 502 or a closed socket).
const acceptQueue = 256

// Config says where and how to connect.
type Config struct {
	// Addr is the edge's SSH address, host:port (EdgeInfo.SSHAddr).
	Addr string
	// Key is a tunnel key or a tunnels:connect API key.
	Key string
	// HostKey is the edge's host key in authorized_keys form
	// (EdgeInfo.SSHHostKey). Required: the edge is never trusted on first use.
	HostKey string
	// DialTimeout bounds TCP connect plus SSH handshake (default 15s).
	DialTimeout time.Duration
	// KeepaliveInterval and KeepaliveTimeout tune our keepalives (default
	// 15s and 3 intervals); the session ends when the edge stops answering.
	KeepaliveInterval, KeepaliveTimeout time.Duration
	// LocalAddr is the address to dial from (nil: the system's choice). A
	// load generator holding more sessions than one source address has
	// ports spreads them over several.
	LocalAddr net.Addr
	// NoStreams refuses the edge's stream connections (package
	// edge/streams), so every public connection comes on an SSH channel:
	// for a network where only the SSH session may pass.
	NoStreams bool
}

// Session is one connection to the edge.
type Session struct {
	cfg    Config
	conn   ssh.Conn
	queue  chan incoming
	done   chan struct{}
	closed chan struct{}
	// nodes holds the latest node list a cluster's edge sent, unread.
	nodes chan protocol.NodeList

	// open counts the public connections Accept returned that are not
	// closed yet; quiet is signalled when it falls to zero (Drain waits).
	open  atomic.Int64
	quiet chan struct{}
	// asking counts our requests that await their answer (bind, drain,
	// leave); heard is when the edge last sent a request of its own
	// (its keepalive), in Unix nanoseconds. See keepalive.
	asking atomic.Int32
	heard  atomic.Int64

	mu         sync.Mutex
	streamCert string             // the fingerprint the bind reply named
	streams    map[*Conn]struct{} // open stream connections, closed with the session
	err        error
	term       *TerminatedError
	closeOnce  sync.Once
}

// Dial connects and authenticates. A refused login returns *AuthError whose
// message carries the edge's reason.
func Dial(ctx context.Context, cfg Config) (*Session, error) {
	if cfg.HostKey == "" {
		return nil, errors.New("tunnelclient: HostKey is required (take it from the edge API's ssh_host_key)")
	}
	pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(cfg.HostKey))
	if err != nil {
		return nil, fmt.Errorf("tunnelclient: parsing HostKey: %w", err)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 15 * time.Second
	}
	if cfg.KeepaliveInterval <= 0 {
		cfg.KeepaliveInterval = 15 * time.Second
	}
	if cfg.KeepaliveTimeout <= 0 {
		cfg.KeepaliveTimeout = 3 * cfg.KeepaliveInterval
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	d := net.Dialer{LocalAddr: cfg.LocalAddr}
	tcp, err := d.DialContext(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("tunnelclient: dialing edge %s: %w", cfg.Addr, err)
	}
	// Below SSH, the packets of concurrent channels that meet a write in
	// flight leave in one system call (package coalesce).
	raw := coalesce.New(tcp)
	// The handshake has no context of its own: a deadline on the socket
	// and closing it on cancel stand in for one.
	if dl, ok := ctx.Deadline(); ok {
		_ = raw.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = raw.Close() })
	var banner strings.Builder
	sc, chans, reqs, err := ssh.NewClientConn(raw, cfg.Addr, &ssh.ClientConfig{
		User:            protocol.SSHUser,
		Auth:            []ssh.AuthMethod{ssh.Password(cfg.Key)},
		HostKeyCallback: ssh.FixedHostKey(pk),
		BannerCallback: func(msg string) error {
			banner.WriteString(msg)
			return nil
		},
		ClientVersion: "SSH-2.0-tuna-agent",
	})
	if !stop() || err != nil {
		_ = raw.Close()
		if err == nil {
			err = ctx.Err()
		}
		if reason := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(banner.String()), "tuna-edge:")); reason != "" {
			return nil, &AuthError{Code: reasonCode(reason), Reason: reason, Err: err}
		}
		if strings.Contains(err.Error(), "unable to authenticate") {
			return nil, &AuthError{Err: err}
		}
		return nil, fmt.Errorf("tunnelclient: SSH handshake with %s: %w", cfg.Addr, err)
	}
	_ = raw.SetDeadline(time.Time{})
	s := &Session{
		cfg: cfg, conn: sc,
		queue:  make(chan incoming, acceptQueue),
		done:   make(chan struct{}),
		closed: make(chan struct{}),
		quiet:  make(chan struct{}, 1),
		nodes:  make(chan protocol.NodeList, 1),
	}
	s.heard.Store(time.Now().UnixNano())
	go s.channels(chans)
	go s.requests(reqs)
	go s.keepalive()
	go func() {
		err := sc.Wait()
		s.setErr(fmt.Errorf("tunnel connection to %s ended: %w", cfg.Addr, err))
		close(s.done)
		s.closeStreams()
	}()
	return s, nil
}

// setErr records the first cause of the session's end.
func (s *Session) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

func (s *Session) channels(chans <-chan ssh.NewChannel) {
	for nc := range chans {
		if nc.ChannelType() != protocol.ForwardChannelType {
			_ = nc.Reject(ssh.UnknownChannelType, "agents accept only "+protocol.ForwardChannelType)
			continue
		}
		select {
		case s.queue <- incoming{channel: nc}:
		default:
			_ = nc.Reject(ssh.ResourceShortage, "agent is not accepting connections fast enough")
		}
	}
}

func (s *Session) requests(reqs <-chan *ssh.Request) {
	for req := range reqs {
		s.heard.Store(time.Now().UnixNano())
		switch req.Type {
		case protocol.KeepaliveRequestType:
			_ = req.Reply(true, nil)
		case protocol.TerminateRequestType:
			var t protocol.Terminate
			_ = json.Unmarshal(req.Payload, &t)
			s.mu.Lock()
			if s.term == nil {
				s.term = &TerminatedError{Code: t.Code, Reason: t.Reason}
			}
			s.mu.Unlock()
			_ = req.Reply(true, nil)
		case protocol.StreamRequestType:
			go s.dialStream(req.Payload)
		case protocol.NodesRequestType:
			var l protocol.NodeList
			if json.Unmarshal(req.Payload, &l) == nil {
				s.offerNodes(l)
			}
		default:
			if req.WantReply {
				_ = req.Reply(false, nil)
			}
		}
	}
}

// offerNodes replaces any unread list by l: only the latest matters.
func (s *Session) offerNodes(l protocol.NodeList) {
	for {
		select {
		case s.nodes <- l:
			return
		default:
		}
		select {
		case <-s.nodes:
		default:
		}
	}
}

// Nodes delivers the node lists a cluster's edge sends when its set of
// nodes changes (the bind reply carries the first); an unread list is
// replaced by the next. A single edge sends none.
func (s *Session) Nodes() <-chan protocol.NodeList { return s.nodes }

// keepalive ends the session when the edge stops answering, so a dead path
// is noticed even when no traffic flows. SSH answers requests in the order
// they came, and one at a time from here: while a request of ours awaits
// its answer (a bind the edge checks against a slow store), a keepalive
// would wait behind it and time out although the edge is there. So then
// the edge's own keepalives are the sign of life: the session ends only
// when the edge has sent nothing for the timeout.
func (s *Session) keepalive() {
	t := time.NewTicker(s.cfg.KeepaliveInterval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		if s.asking.Load() > 0 {
			if silent := time.Since(time.Unix(0, s.heard.Load())); silent > s.cfg.KeepaliveTimeout {
				s.setErr(fmt.Errorf("keepalive timeout: edge %s sent nothing for %s while a request awaited its answer",
					s.cfg.Addr, silent.Round(time.Millisecond)))
				_ = s.conn.Close()
			}
			continue
		}
		res := make(chan error, 1)
		go func() {
			_, _, err := s.conn.SendRequest(protocol.KeepaliveRequestType, true, nil)
			res <- err
		}()
		s.awaitKeepalive(res)
	}
}

// awaitKeepalive waits for a keepalive's answer. A request of ours that
// began as the keepalive did may have been sent first (x/crypto/ssh sends
// one request at a time and the edge answers in order): the keepalive then
// waits behind that request's answer, and, as in keepalive, the edge's own
// keepalives are the sign of life meanwhile.
func (s *Session) awaitKeepalive(res <-chan error) {
	timer := time.NewTimer(s.cfg.KeepaliveTimeout)
	defer timer.Stop()
	for {
		select {
		case err := <-res:
			// A failed keepalive means the connection is gone: the
			// session's end reports why, not this probe.
			_ = err
			return
		case <-s.done:
			return
		case <-timer.C:
		}
		silent := time.Since(time.Unix(0, s.heard.Load()))
		if s.asking.Load() > 0 && silent <= s.cfg.KeepaliveTimeout {
			timer.Reset(s.cfg.KeepaliveTimeout - silent + time.Millisecond)
			continue
		}
		s.setErr(fmt.Errorf("keepalive timeout: edge %s did not answer within %s", s.cfg.Addr, s.cfg.KeepaliveTimeout))
		_ = s.conn.Close()
		return
	}
}

// ask sends a request that wants an answer, counted in asking while it
// waits for it.
func (s *Session) ask(name string, payload []byte) (bool, []byte, error) {
	s.asking.Add(1)
	defer s.asking.Add(-1)
	return s.conn.SendRequest(name, true, payload)
}

// Bind asks the edge to publish an address; a refusal is *BindError.
func (s *Session) Bind(ctx context.Context, req protocol.BindRequest) (protocol.BindReply, error) {
	type result struct {
		ok      bool
		payload []byte
		err     error
	}
	r := make(chan result, 1)
	go func() {
		ok, payload, err := s.ask(protocol.BindRequestType, protocol.Marshal(req))
		r <- result{ok, payload, err}
	}()
	var res result
	select {
	case res = <-r:
	case <-ctx.Done():
		return protocol.BindReply{}, ctx.Err()
	}
	if res.err != nil {
		return protocol.BindReply{}, fmt.Errorf("tunnelclient: bind: %w", res.err)
	}
	if !res.ok {
		var er protocol.ErrorReply
		if err := json.Unmarshal(res.payload, &er); err != nil || er.Code == "" {
			return protocol.BindReply{}, &BindError{Code: protocol.CodeInvalidRequest, Message: "bind refused without a reason"}
		}
		return protocol.BindReply{}, &BindError{Code: er.Code, Message: er.Error}
	}
	var reply protocol.BindReply
	if err := json.Unmarshal(res.payload, &reply); err != nil {
		return protocol.BindReply{}, fmt.Errorf("tunnelclient: decoding bind reply: %w", err)
	}
	if reply.StreamCert != "" {
		s.mu.Lock()
		s.streamCert = reply.StreamCert
		s.mu.Unlock()
	}
	return reply, nil
}

// Drain tells the edge to send this session no new public connections
// while other sessions of its pool are live, and to close the ones it
// carries as each becomes idle (it closes the idle ones before it
// answers). The session's own side never closes a kept connection while
// it drains: a close of its own could cross a request the edge is just
// sending. Keep accepting, since a connection the edge opened just before
// may still arrive, and wait (Quiet) until the edge has closed them all.
// An edge without pools refuses it.
func (s *Session) Drain(ctx context.Context) error {
	r := make(chan error, 1)
	go func() {
		ok, _, err := s.ask(protocol.DrainRequestType, nil)
		if err == nil && !ok {
			err = errors.New("the edge does not support draining")
		}
		r <- err
	}()
	select {
	case err := <-r:
		if err != nil {
			return fmt.Errorf("tunnelclient: drain: %w", err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Leave asks the edge to take the session out of its pools once it
// drains: it reports whether the edge did (no new connection will come),
// or false while the session is the last live member of a pool it
// serves, which the edge keeps routing to it.
func (s *Session) Leave(ctx context.Context) (bool, error) {
	r := make(chan error, 1)
	var ok bool
	go func() {
		var err error
		ok, _, err = s.ask(protocol.LeaveRequestType, nil)
		r <- err
	}()
	select {
	case err := <-r:
		if err != nil {
			return false, fmt.Errorf("tunnelclient: leave: %w", err)
		}
		return ok, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// Quiet waits until every public connection Accept returned is closed,
// for ctx, or for the session's end (which closes them all).
func (s *Session) Quiet(ctx context.Context) error {
	for s.open.Load() > 0 {
		select {
		case <-s.quiet:
		case <-s.done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("tunnelclient: %d connections still open: %w", s.open.Load(), ctx.Err())
		}
	}
	return nil
}

// Open is how many public connections Accept returned that are still open.
func (s *Session) Open() int { return int(s.open.Load()) }

// track counts c as open until it is closed.
func (s *Session) track(c *Conn) *Conn {
	c.owner = s
	s.open.Add(1)
	return c
}

// closed is told, once per connection, that one was closed.
func (s *Session) closedConn() {
	if s.open.Add(-1) == 0 {
		select {
		case s.quiet <- struct{}{}:
		default:
		}
	}
}

// Accept returns the next public connection.
func (s *Session) Accept() (*Conn, error) { return s.accept(nil) }

// accept waits for a connection until the session ends or stop closes.
func (s *Session) accept(stop <-chan struct{}) (*Conn, error) {
	for {
		select {
		case in := <-s.queue:
			if in.stream != nil {
				return s.track(in.stream), nil
			}
			nc := in.channel
			var info protocol.ForwardInfo
			_ = json.Unmarshal(nc.ExtraData(), &info)
			ch, reqs, err := nc.Accept()
			if err != nil {
				continue // the edge gave up on this one
			}
			go ssh.DiscardRequests(reqs)
			return s.track(&Conn{Conn: chanconn.New(ch, s.conn.LocalAddr(), remoteAddr(info.RemoteAddr)), info: info}), nil
		case <-stop:
			return nil, net.ErrClosed
		case <-s.closed:
			return nil, net.ErrClosed
		case <-s.done:
			// Closed for good, whatever ended the session: an accept
			// loop must not take a timeout that ended it for one that
			// passes (internal/accept retries those).
			return nil, fmt.Errorf("%w: %w", net.ErrClosed, s.Err())
		}
	}
}

// Done is closed when the session has ended.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err says why the session ended: *TerminatedError when the edge said why,
// otherwise the transport error. It is nil while the session is live.
func (s *Session) Err() error {
	select {
	case <-s.done:
	default:
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.term != nil {
		return s.term
	}
	return s.err
}

// Close ends the session.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		s.setErr(errors.New("session closed by the agent"))
		close(s.closed)
	})
	err := s.conn.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
