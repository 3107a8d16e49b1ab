// Package sshd is the edge's side of the tunnel transport: an SSH server on
// which agents authenticate with a key, bind public addresses and receive
// one channel per public connection. The protocol is in edge/protocol.
package sshd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/internal/third_party/xcrypto/ssh"

	"code.tuna.am/tuna/k8s-operator/edge/internal/access"
	"code.tuna.am/tuna/k8s-operator/edge/internal/auth"
	"code.tuna.am/tuna/k8s-operator/edge/internal/registry"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
	"code.tuna.am/tuna/k8s-operator/edge/internal/streamhub"
	"code.tuna.am/tuna/k8s-operator/edge/internal/tcpports"
	"code.tuna.am/tuna/k8s-operator/edge/keys"
	"code.tuna.am/tuna/k8s-operator/edge/metrics"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/internal/accept"
	"code.tuna.am/tuna/k8s-operator/internal/coalesce"
)

// handshakeTimeout bounds a connection that never finishes the SSH
// handshake, so idle sockets cannot pile up.
const handshakeTimeout = 20 * time.Second

// maxClaimWait bounds how long a login waits to learn whether the session
// holding its tunnel key is dead (it stays well inside handshakeTimeout);
// pendingClaimPoll is how often it looks while the holder is still in its
// own handshake.
const (
	maxClaimWait     = 5 * time.Second
	pendingClaimPoll = 20 * time.Millisecond
)

// Config is what the SSH server needs to know about the edge.
type Config struct {
	// Access decides the TCP connections of addresses an access policy
	// guards (nil: such addresses refuse every connection).
	Access     *access.Engine
	HostKey    ssh.Signer
	BaseDomain string
	// Claimable reports whether a tunnel key's address is bound without a
	// reservation: the edge's Gateway addresses, and any host on an
	// --any-host edge, which the key's owner claimed when it was issued
	// (api.Server.Claimable). nil: none beyond subdomains.
	Claimable func(host string) bool
	// PublicURL renders the public URL of an HTTP host.
	PublicURL func(host string) string
	// TCPListenHost is where TCP endpoints listen; PublicTCPHost is the host
	// name published in tcp:// URLs.
	TCPListenHost, PublicTCPHost string
	TCPPortFirst, TCPPortLast    int
	// Ports holds the reserved TCP endpoints' listeners; binds attach to them.
	Ports             *tcpports.Manager
	KeepaliveInterval time.Duration
	KeepaliveTimeout  time.Duration
	Limits            Limits
	// Streams, when set, carries TCP endpoints' public connections on
	// stream connections that agents dial to this port (package
	// edge/streams) instead of SSH channels; nil sends channels only.
	Streams *streamhub.Hub
	Logger  *slog.Logger
}

// Limits bound what one agent, or a crowd of connections, can hold on the
// edge. Each is refused at once when reached, with the code limit_exceeded,
// and counted in tuna_edge_limit_refusals_total; 0 means no limit.
type Limits struct {
	// Handshakes caps connections that have not finished logging in.
	Handshakes int
	// SessionsPerKey caps the live sessions of one tunnels:connect API key.
	SessionsPerKey int
	// SessionsPerTunnelKey is the default size of a tunnel key's session
	// pool (a key's own MaxSessions overrides it). Unlike the others it is
	// never off: a value below 1 counts as 1, so a leaked key cannot open
	// sessions without bound.
	SessionsPerTunnelKey int
	// BindsPerSession caps the addresses one session binds.
	BindsPerSession int
	// ChannelsPerSession caps one session's open forward channels.
	ChannelsPerSession int
	// ConnectionsPerTunnel caps the concurrent public connections of one
	// bound TCP endpoint (the HTTP side applies it per host).
	ConnectionsPerTunnel int
}

// Server accepts agent connections.
type Server struct {
	cfg     Config
	st      *store.Store
	reg     *registry.Registry
	m       *metrics.Metrics
	log     *slog.Logger
	sshCfg  *ssh.ServerConfig
	pending sync.Map // remote addr -> *pendingAuth, between password check and session start
	closing atomic.Bool
	// handshakes counts connections from accept to the end of login.
	handshakes registry.Slots
	mu         sync.Mutex
	lns        []net.Listener
	keyUses    map[string]int // API key id -> logins and live sessions (under mu)
	wg         sync.WaitGroup

	// The cluster's nodes (nodes.go), under nodesMu with the sessions
	// told of their changes.
	nodesMu      sync.Mutex
	nodes        []protocol.Node
	nodesVersion uint64
	live         map[*session]struct{}

	// watch waits on the idle sessions (watch.go).
	watch watchers
}

type pendingAuth struct {
	p   *auth.Principal
	sid string
}

// release gives back what the login took: the tunnel key's claim or the
// API key's session slot.
func (s *Server) release(pa *pendingAuth) {
	if pa.p.Kind == keys.KindTunnel {
		s.reg.ReleaseClaim(pa.p.ID, pa.sid)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keyUses[pa.p.ID]--; s.keyUses[pa.p.ID] <= 0 {
		delete(s.keyUses, pa.p.ID)
	}
}

// takeKeySession counts a login of an API key against SessionsPerKey.
func (s *Server) takeKeySession(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	limit := s.cfg.Limits.SessionsPerKey
	if n := s.keyUses[id]; limit > 0 && n >= limit {
		return &registry.LimitError{Limit: metrics.LimitSessionsPerKey, Value: limit,
			What: fmt.Sprintf("API key %s already has %d live sessions; end one or use another key", id, n)}
	}
	s.keyUses[id]++
	return nil
}

// New builds a server; call Serve to accept connections.
func New(cfg Config, st *store.Store, reg *registry.Registry, m *metrics.Metrics) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.KeepaliveInterval <= 0 {
		cfg.KeepaliveInterval = 15 * time.Second
	}
	if cfg.KeepaliveTimeout <= 0 {
		cfg.KeepaliveTimeout = 3 * cfg.KeepaliveInterval
	}
	s := &Server{cfg: cfg, st: st, reg: reg, m: m, log: cfg.Logger.With("component", "sshd"), keyUses: map[string]int{}, live: map[*session]struct{}{}}
	s.sshCfg = &ssh.ServerConfig{
		PasswordCallback: s.password,
		ServerVersion:    "SSH-2.0-tuna-edge",
		MaxAuthTries:     3,
	}
	s.sshCfg.AddHostKey(cfg.HostKey)
	s.watch.open = func(w *watcher) { go w.run(s.serveQueued) }
	return s
}

// sessionID derives the public session id from the SSH exchange hash, which
// is unique per connection and known to both the auth callback and the
// established connection.
func sessionID(meta ssh.ConnMetadata) string {
	return fmt.Sprintf("ses_%x", meta.SessionID()[:8])
}

// refuse makes an auth failure whose reason reaches the client as an SSH
// banner: without it the client would only learn "unable to authenticate".
func refuse(format string, args ...any) error {
	reason := fmt.Sprintf(format, args...)
	return &ssh.BannerError{Err: errors.New(reason), Message: "tuna-edge: " + reason + "\n"}
}

func (s *Server) password(meta ssh.ConnMetadata, pw []byte) (*ssh.Permissions, error) {
	if s.closing.Load() {
		return nil, refuse("edge is shutting down; retry shortly")
	}
	if meta.User() != protocol.SSHUser {
		return nil, refuse("unknown user %q: agents log in as %q", meta.User(), protocol.SSHUser)
	}
	p, err := auth.Authenticate(s.st, string(pw))
	if err != nil {
		if errors.Is(err, auth.ErrInvalidKey) {
			return nil, refuse("invalid or revoked key")
		}
		var expired *auth.ExpiredError
		if errors.As(err, &expired) {
			return nil, refuse("%s: %v", protocol.CodeKeyExpired, expired)
		}
		if errors.Is(err, store.ErrUnavailable) {
			s.log.Warn("login refused: the state store is unavailable", "err", err)
			return nil, refuse("%s: the edge cannot reach its state store to check the key; retry shortly", protocol.CodeStateUnavailable)
		}
		s.log.Error("authenticating agent", "err", err)
		return nil, refuse("internal error while checking the key")
	}
	if err := auth.MayConnect(p); err != nil {
		return nil, refuse("%v", err)
	}
	sid := sessionID(meta)
	if p.Kind == keys.KindTunnel {
		limit := s.poolSize(p)
		if err := s.claimKey(p.ID, sid, limit); err != nil {
			s.m.LimitRefused(metrics.LimitSessionsPerTunnelKey)
			return nil, refuse("%v", &registry.LimitError{Limit: metrics.LimitSessionsPerTunnelKey, Value: limit,
				What: fmt.Sprintf("tunnel key %s already has %d live sessions, as many as its pool allows; end one, or issue the key with a larger max_sessions", p.ID, limit)})
		}
	} else if err := s.takeKeySession(p.ID); err != nil {
		s.m.LimitRefused(metrics.LimitSessionsPerKey)
		return nil, refuse("%v", err)
	}
	s.pending.Store(meta.RemoteAddr().String(), &pendingAuth{p: p, sid: sid})
	return &ssh.Permissions{}, nil
}

// Serve accepts connections on ln until it is closed. A Serve that starts
// after Close (the edge starts it in a goroutine, and a test may close the
// edge at once) closes ln and returns: Close closed only the listeners it
// knew, and this one would block the edge's Close forever.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		return ln.Close()
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	al := accept.Wrap(ln, func(err error, wait time.Duration) {
		s.log.Warn("accepting an SSH connection failed; retrying", "err", err, "retry_in", wait)
	})
	for {
		c, err := al.Accept()
		if err != nil {
			if s.closing.Load() {
				return nil
			}
			return fmt.Errorf("ssh accept, stopped for good: %w", err)
		}
		if !s.handshakes.Take(s.cfg.Limits.Handshakes) {
			s.refuseHandshake(c)
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(c)
		}()
	}
}

// refuseHandshake closes a connection over the handshake limit at once.
// The one line it writes comes before the SSH version exchange, where SSH
// allows other lines, so a person or a log sees why.
func (s *Server) refuseHandshake(c net.Conn) {
	s.m.LimitRefused(metrics.LimitHandshakes)
	err := &registry.LimitError{Limit: metrics.LimitHandshakes, Value: s.cfg.Limits.Handshakes,
		What: "too many SSH logins in progress on this edge; retry shortly"}
	// Debug, not Warn: a flood of connections would flood the log; the
	// metric counts them.
	s.log.Debug("refused SSH connection", "remote", c.RemoteAddr().String(), "err", err)
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Write([]byte("tuna-edge: " + err.Error() + "\r\n"))
	_ = c.Close()
}

func (s *Server) handle(raw net.Conn) {
	deadline := time.Now().Add(handshakeTimeout)
	_ = raw.SetDeadline(deadline)
	if s.cfg.Streams != nil {
		var isStream bool
		raw, isStream = peekStream(raw, deadline)
		if isStream {
			err := s.cfg.Streams.Serve(raw, streamHandshakeTimeout)
			s.handshakes.Put()
			if err != nil {
				s.log.Debug("stream connection refused", "remote", raw.RemoteAddr().String(), "err", err)
			}
			return
		}
	}
	// Below SSH, the packets of concurrent channels that meet a write in
	// flight leave in one system call (package coalesce).
	raw = coalesce.New(raw)
	sc, chans, reqs, err := ssh.NewServerConn(raw, s.sshCfg)
	s.handshakes.Put()
	pa, _ := s.pending.LoadAndDelete(raw.RemoteAddr().String())
	if err != nil {
		_ = raw.Close()
		if pa != nil {
			s.release(pa.(*pendingAuth))
		}
		s.log.Debug("ssh handshake failed", "remote", raw.RemoteAddr().String(), "err", err)
		return
	}
	_ = raw.SetDeadline(time.Time{})
	if pa == nil { // cannot happen: password auth is the only method
		_ = sc.Close()
		return
	}
	pend := pa.(*pendingAuth)
	ss := newSession(s, sc, pend.p, pend.sid)
	s.reg.Add(ss, pend.p.Kind == keys.KindTunnel)
	s.m.SessionOpened()
	s.log.Info("session started", "session", ss.id, "key", pend.p.ID, "remote", ss.remote)
	if s.closing.Load() {
		// Close raced with this handshake: do not leave a session behind.
		go ss.Terminate(protocol.CodeEdgeShuttingDown, "edge is shutting down")
	} else {
		// The key may have been revoked between the password check and
		// Add, when the revocation could not yet see this session. The
		// look is a store read, which may take the store's timeout (an
		// etcd member going away): the session is served meanwhile, or
		// its agent's keepalives would go unanswered and it would hang up.
		go func() {
			if !s.keyExists(pend.p) {
				ss.Terminate(protocol.CodeKeyRevoked, "key "+pend.p.ID+" was revoked")
			}
		}()
	}
	s.track(ss)
	// The session is served by a watcher, with no goroutine of its own
	// while idle (watch.go), and this goroutine ends: the handshake (key
	// exchange, password check, store reads) grew its stack to 8 KiB or
	// more, which an idle session would hold for its whole life, as the
	// GC halves a stack only while a quarter of it is in use.
	ss.newChans, ss.reqs, ss.pend = chans, reqs, pend
	ss.stopKeepalive = ss.keepalive()
	s.wg.Add(1)
	s.watch.watch(ss)
}

// endSession takes down a session whose connection is gone.
func (s *Server) endSession(ss *session) {
	defer s.wg.Done()
	ss.end() // unregisters the session before it returns
	s.watch.forget(ss)
	s.untrack(ss)
	if ss.pend.p.Kind != keys.KindTunnel {
		s.release(ss.pend) // a tunnel key's claim went with the session
	}
	s.m.SessionClosed()
	s.log.Info("session ended", "session", ss.id, "key", ss.pend.p.ID)
}

// poolSize is how many live sessions tunnel key p may hold at once.
func (s *Server) poolSize(p *auth.Principal) int {
	if p.Tunnel != nil && p.Tunnel.MaxSessions > 0 {
		return p.Tunnel.MaxSessions
	}
	return max(s.cfg.Limits.SessionsPerTunnelKey, 1)
}

// claimKey takes a place in a tunnel key's session pool. When the pool is
// full, the newcomer gets a place only once a holder is gone: an agent that
// reconnects right after a drop must not be told that its own dead session
// still fills the pool. A holder is gone when its connection has closed, or
// when it does not answer a keepalive within the probe timeout (a half-open
// connection, e.g. the agent's node was lost); such a holder is closed
// here. While every holder answers, the pool stays full.
func (s *Server) claimKey(keyID, sid string, limit int) error {
	wait := min(s.cfg.KeepaliveTimeout, maxClaimWait)
	deadline := time.Now().Add(wait)
	for {
		err := s.reg.ClaimKey(keyID, sid, limit)
		if !errors.Is(err, registry.ErrKeyBusy) {
			return err
		}
		holders := s.reg.Holders(keyID)
		if len(holders) == 0 {
			continue // released in between: claim again
		}
		left := time.Until(deadline)
		if left <= 0 {
			return err
		}
		freed, pending := s.probeHolders(holders, left)
		switch {
		case freed != nil:
			select {
			case <-freed:
			case <-time.After(left):
			}
		case pending:
			// A holder's handshake is still running: look again soon.
			time.Sleep(min(left, pendingClaimPoll))
		default:
			return err
		}
	}
}

// probeHolders checks the pool's established sessions in parallel, closes
// those that do not answer within timeout and returns the released channel
// of one of them (nil if all answered); pending reports a holder still in
// its handshake.
func (s *Server) probeHolders(holders []registry.Holder, timeout time.Duration) (freed <-chan struct{}, pending bool) {
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for _, h := range holders {
		hs, _ := h.Session.(*session)
		if hs == nil {
			pending = true
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if hs.alive(timeout) {
				return
			}
			_ = hs.conn.Close() // it unregisters on its way out
			mu.Lock()
			freed = h.Released
			mu.Unlock()
		}()
	}
	wg.Wait()
	return freed, pending
}

func (s *Server) keyExists(p *auth.Principal) bool {
	var err error
	if p.Kind == keys.KindTunnel {
		_, err = s.st.GetTunnelKey(p.ID)
	} else {
		_, err = s.st.GetAPIKey(p.ID)
	}
	return !errors.Is(err, store.ErrNotFound)
}

// idlePoll is how often WaitIdle looks at the sessions' connections.
const idlePoll = 50 * time.Millisecond

// WaitIdle waits until no session carries a public connection, or ctx
// ends: on shutdown, the public listeners have stopped and the connections
// in flight (TCP streams, say) may finish before the sessions go.
func (s *Server) WaitIdle(ctx context.Context) error {
	t := time.NewTicker(idlePoll)
	defer t.Stop()
	for s.reg.Load() > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d tunnel connections still open: %w", s.reg.Load(), ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// Close stops accepting, tells every agent the edge is shutting down and
// waits for the sessions to end. The code edge_shutting_down tells agents
// to reconnect at once (to another node, or to this one restarted).
func (s *Server) Close() error {
	s.closing.Store(true)
	s.mu.Lock()
	var errs []error
	for _, ln := range s.lns {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	s.mu.Unlock()
	s.reg.TerminateAll(protocol.CodeEdgeShuttingDown, "edge is shutting down; reconnect")
	s.wg.Wait()
	return errors.Join(errs...)
}
