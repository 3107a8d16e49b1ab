// Package tcpports owns the public listeners of reserved TCP endpoints.
//
// A reservation holds its port from the moment it is made until it is
// deleted, whether or not a session serves it: the port is the endpoint's
// address, and if the edge let go of it between sessions, any process on the
// edge's host could take it and the reservation would break. So a port is
// only handed out once the edge has bound it, a port that another process
// holds is skipped, and a session attaches to the listener it finds rather
// than opening one. A connection to a reserved port that no session serves
// is accepted and closed at once.
package tcpports

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"code.tuna.am/tuna/k8s-operator/internal/accept"
)

var (
	// ErrExhausted: every port of the range is reserved or held by another
	// process on the edge's host.
	ErrExhausted = errors.New("no port of the TCP range is free")
	// ErrClosed: the manager is shut down.
	ErrClosed = errors.New("TCP port manager is closed")
)

// Serve handles one accepted public connection; it owns the connection.
type Serve func(net.Conn)

// Manager is safe for concurrent use.
type Manager struct {
	// OnFail, if set, is told of a port whose listener stopped accepting
	// for good (transient errors are waited out: package accept).
	OnFail func(port int, err error)

	host        string
	first, last int
	log         *slog.Logger

	mu     sync.Mutex
	closed bool
	held   map[int]*port
	wg     sync.WaitGroup
}

type port struct {
	ln    net.Listener
	route atomic.Pointer[route]
}

type route struct {
	owner string
	serve Serve
}

// New manages ports first..last on host. Nothing listens until Pick or Hold.
func New(host string, first, last int, log *slog.Logger) *Manager {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{host: host, first: first, last: last, log: log, held: map[int]*port{}}
}

// Pick binds the lowest port of the range that is not in taken (reserved
// already) and that the edge can listen on, holds it, and returns it. Ports
// other processes hold are skipped. The caller records the reservation, or
// calls Release when it cannot.
func (m *Manager) Pick(taken map[int]bool) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	var lastErr error
	for p := m.first; p <= m.last; p++ {
		if taken[p] || m.held[p] != nil {
			continue
		}
		if err := m.holdLocked(p); err != nil {
			lastErr = err
			continue
		}
		return p, nil
	}
	if lastErr != nil {
		return 0, fmt.Errorf("%w (range %d-%d; last refusal: %w)", ErrExhausted, m.first, m.last, lastErr)
	}
	return 0, fmt.Errorf("%w (range %d-%d)", ErrExhausted, m.first, m.last)
}

// Hold makes sure the edge listens on p, the port of an existing
// reservation. It is a no-op when p is held already.
func (m *Manager) Hold(p int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if m.held[p] != nil {
		return nil
	}
	return m.holdLocked(p)
}

func (m *Manager) holdLocked(p int) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(m.host, strconv.Itoa(p)))
	if err != nil {
		return fmt.Errorf("listening on port %d: %w", p, err)
	}
	hp := &port{ln: ln}
	m.held[p] = hp
	m.wg.Add(1)
	go m.accept(p, hp)
	return nil
}

// Release closes p's listener: the reservation is gone. Connections already
// handed to a session carry on.
func (m *Manager) Release(p int) {
	m.mu.Lock()
	hp := m.held[p]
	delete(m.held, p)
	m.mu.Unlock()
	if hp != nil {
		_ = hp.ln.Close()
	}
}

// Attach sends p's new connections to serve, on behalf of owner (a session
// id). It binds p first when the edge does not hold it yet (a port another
// process took while the edge was down).
func (m *Manager) Attach(p int, owner string, serve Serve) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	hp := m.held[p]
	if hp == nil {
		if err := m.holdLocked(p); err != nil {
			return err
		}
		hp = m.held[p]
	}
	hp.route.Store(&route{owner: owner, serve: serve})
	return nil
}

// Detach stops sending p's connections to owner; until another Attach, new
// connections are closed at once. Detaching a port another owner took over
// does nothing.
func (m *Manager) Detach(p int, owner string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if hp := m.held[p]; hp != nil {
		if r := hp.route.Load(); r != nil && r.owner == owner {
			hp.route.Store(nil)
		}
	}
}

// Held reports whether the edge listens on p.
func (m *Manager) Held(p int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held[p] != nil
}

// Close closes every listener and waits for the accept loops to end.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	held := m.held
	m.held = map[int]*port{}
	m.mu.Unlock()
	for _, hp := range held {
		_ = hp.ln.Close()
	}
	m.wg.Wait()
}

func (m *Manager) accept(p int, hp *port) {
	defer m.wg.Done()
	l := accept.Wrap(hp.ln, func(err error, wait time.Duration) {
		m.log.Warn("accepting on a TCP endpoint port failed; retrying", "port", p, "err", err, "retry_in", wait)
	})
	err := accept.Serve(l, func(c net.Conn) {
		r := hp.route.Load()
		if r == nil {
			_ = c.Close() // reserved, but no session serves it now
			return
		}
		r.serve(c)
	})
	if err == nil {
		return
	}
	m.log.Error("a TCP endpoint port stopped accepting for good", "port", p, "err", err)
	if m.OnFail != nil {
		m.OnFail(p, err)
	}
}
