// Package sshd is the edge's side of the tunnel transport: an SSH server on
// which agents authenticate with a key, bind public addresses and receive
// one channel per public connection. The protocol is in edge/protocol.
package sshd

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"

	"code.tuna.am/tuna/k8s-operator/edge/auth"
	"code.tuna.am/tuna/k8s-operator/edge/keys"
	"code.tuna.am/tuna/k8s-operator/edge/metrics"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/registry"
	"code.tuna.am/tuna/k8s-operator/edge/store"
	"code.tuna.am/tuna/k8s-operator/edge/tcpports"
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
	HostKey    ssh.Signer
	BaseDomain string
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
	Logger            *slog.Logger
}

// Limits bound what one agent, or a crowd of connections, can hold on the
// edge. Each is refused at once when reached, with the code limit_exceeded,
// and counted in tuna_edge_limit_refusals_total; 0 means no limit.
type Limits struct {
	// Handshakes caps connections that have not finished logging in.
	Handshakes int
	// SessionsPerKey caps the live sessions of one tunnels:connect API key
	// (a tunnel key always carries one).
	SessionsPerKey int
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
	s := &Server{cfg: cfg, st: st, reg: reg, m: m, log: cfg.Logger.With("component", "sshd"), keyUses: map[string]int{}}
	s.sshCfg = &ssh.ServerConfig{
		PasswordCallback: s.password,
		ServerVersion:    "SSH-2.0-tuna-edge",
		MaxAuthTries:     3,
	}
	s.sshCfg.AddHostKey(cfg.HostKey)
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
		if err := s.claimKey(p.ID, sid); err != nil {
			return nil, refuse("tunnel key %s already has a live session: a tunnel key carries one session at a time", p.ID)
		}
	} else if err := s.takeKeySession(p.ID); err != nil {
		s.m.LimitRefused(metrics.LimitSessionsPerKey)
		return nil, refuse("%v", err)
	}
	s.pending.Store(meta.RemoteAddr().String(), &pendingAuth{p: p, sid: sid})
	return &ssh.Permissions{}, nil
}

// Serve accepts connections on ln until it is closed.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return nil
			}
			return fmt.Errorf("ssh accept: %w", err)
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
	_ = raw.SetDeadline(time.Now().Add(handshakeTimeout))
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
	s.reg.Add(ss)
	s.m.SessionOpened()
	s.log.Info("session started", "session", ss.id, "key", pend.p.ID, "remote", ss.remote)
	if s.closing.Load() {
		// Close raced with this handshake: do not leave a session behind.
		go ss.Terminate(protocol.CodeEdgeShuttingDown, "edge is shutting down")
	} else if !s.keyExists(pend.p) {
		// The key was revoked between the password check and Add, when
		// the revocation could not yet see this session.
		go ss.Terminate(protocol.CodeKeyRevoked, "key "+pend.p.ID+" was revoked")
	}
	ss.run(chans, reqs) // unregisters the session before it returns
	if pend.p.Kind != keys.KindTunnel {
		s.release(pend) // a tunnel key's claim went with the session
	}
	s.m.SessionClosed()
	s.log.Info("session ended", "session", ss.id, "key", pend.p.ID)
}

// claimKey takes a tunnel key's claim to its one live session. When another
// session holds it, the newcomer gets it only once the holder is gone: an
// agent that reconnects right after a drop must not be told that its own
// dead session still has the key. The holder is gone when its connection has
// closed, or when it does not answer a keepalive within the probe timeout
// (a half-open connection, e.g. the agent's node was lost); such a holder is
// closed here. A holder that answers keeps the key.
func (s *Server) claimKey(keyID, sid string) error {
	wait := min(s.cfg.KeepaliveTimeout, maxClaimWait)
	deadline := time.Now().Add(wait)
	for {
		err := s.reg.ClaimKey(keyID, sid)
		if !errors.Is(err, registry.ErrKeyBusy) {
			return err
		}
		holder, released, held := s.reg.Holder(keyID)
		if !held {
			continue // released in between: claim again
		}
		left := time.Until(deadline)
		if left <= 0 {
			return err
		}
		hs, _ := holder.(*session)
		if hs == nil {
			// The holder's handshake is still running: look again soon.
			left = min(left, pendingClaimPoll)
		} else if hs.alive(left) {
			return err
		} else {
			_ = hs.conn.Close() // it unregisters on its way out
		}
		select {
		case <-released:
		case <-time.After(left):
		}
	}
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

// Close stops accepting, tells every agent the edge is shutting down and
// waits for the sessions to end.
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
	s.reg.TerminateAll(protocol.CodeEdgeShuttingDown, "edge is shutting down")
	s.wg.Wait()
	return errors.Join(errs...)
}
