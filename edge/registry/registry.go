// Package registry tracks the live tunnel sessions and what they are bound
// to. The HTTP route table is an immutable map behind an atomic pointer:
// public requests look hosts up without taking a lock, and the rare writers
// (bind, session end) copy the map under a mutex and swap it.
package registry

import (
	"context"
	"errors"
	"maps"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/acl"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

var (
	// ErrAddressTaken is returned when another live session holds an address.
	ErrAddressTaken = errors.New("address is bound by another session")
	// ErrKeyBusy is returned when a tunnel key already has a live session.
	ErrKeyBusy = errors.New("tunnel key already has a live session")
)

// Session is a live tunnel session, implemented by the SSH server.
type Session interface {
	ID() string
	// KeyID is the id of the key that authenticated the session.
	KeyID() string
	RemoteAddr() string
	ConnectedAt() time.Time
	// OpenForward opens a channel for one public connection.
	OpenForward(ctx context.Context, info protocol.ForwardInfo) (net.Conn, error)
	// Terminate tells the agent why and closes the session.
	Terminate(code, reason string)
}

// Route is a public HTTP host bound to a session.
type Route struct {
	Host    string
	URL     string
	Session Session
	ACL     *acl.List
	// Conns counts the host's requests in flight, for the per-tunnel
	// connection limit.
	Conns Slots
}

// Info describes a live session for the API.
type Info struct {
	ID          string
	KeyID       string
	URL         string
	RemoteAddr  string
	ConnectedAt time.Time
}

type entry struct {
	s     Session
	urls  []string
	hosts []string
	ports []int
}

// claim is a tunnel key's one live session, from its password check on.
type claim struct {
	sid      string
	sess     Session       // nil until the handshake completes (Add)
	released chan struct{} // closed when the claim is dropped
}

// Registry is safe for concurrent use.
type Registry struct {
	mu       sync.Mutex
	sessions map[string]*entry // by session id
	claims   map[string]*claim // by tunnel key id
	hosts    map[string]string // http host -> session id
	ports    map[int]string    // tcp port -> session id
	routes   atomic.Pointer[map[string]*Route]
}

// New returns an empty registry.
func New() *Registry {
	r := &Registry{
		sessions: map[string]*entry{},
		claims:   map[string]*claim{},
		hosts:    map[string]string{},
		ports:    map[int]string{},
	}
	empty := map[string]*Route{}
	r.routes.Store(&empty)
	return r
}

// Lookup returns the route of host (lower case, no port) or nil. Lock-free.
func (r *Registry) Lookup(host string) *Route { return (*r.routes.Load())[host] }

// ClaimKey reserves a tunnel key for session id sid; a key may hold one live
// session. It is called during authentication, before the session exists,
// so two simultaneous logins with one key cannot both win.
func (r *Registry) ClaimKey(keyID, sid string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.claims[keyID]; ok {
		if cur.sid != sid {
			return ErrKeyBusy
		}
		return nil
	}
	r.claims[keyID] = &claim{sid: sid, released: make(chan struct{})}
	return nil
}

// Holder returns the session that holds keyID's claim (nil while its
// handshake is still running) and a channel that is closed when the claim
// is released; ok is false when nobody holds it.
func (r *Registry) Holder(keyID string) (s Session, released <-chan struct{}, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.claims[keyID]
	if !ok {
		return nil, nil, false
	}
	return c.sess, c.released, true
}

// ReleaseClaim undoes ClaimKey when the handshake fails after auth.
func (r *Registry) ReleaseClaim(keyID, sid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.releaseLocked(keyID, sid)
}

func (r *Registry) releaseLocked(keyID, sid string) {
	if c, ok := r.claims[keyID]; ok && c.sid == sid {
		delete(r.claims, keyID)
		close(c.released)
	}
}

// Add registers a session after its handshake.
func (r *Registry) Add(s Session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sessions[s.ID()] = &entry{s: s}
	if c, ok := r.claims[s.KeyID()]; ok && c.sid == s.ID() {
		c.sess = s
	}
}

// Remove forgets a session, its claim and its bindings, in one step: once
// a session is gone from the table its key may connect again.
func (r *Registry) Remove(sid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.sessions[sid]
	if !ok {
		return
	}
	delete(r.sessions, sid)
	r.releaseLocked(e.s.KeyID(), sid)
	for _, p := range e.ports {
		delete(r.ports, p)
	}
	if len(e.hosts) > 0 {
		next := maps.Clone(*r.routes.Load())
		for _, h := range e.hosts {
			delete(r.hosts, h)
			delete(next, h)
		}
		r.routes.Store(&next)
	}
}

// BindHTTP publishes a route; ErrAddressTaken if another session holds the
// host. Binding the same host again from the same session is a no-op.
func (r *Registry) BindHTTP(rt *Route) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	sid := rt.Session.ID()
	e, ok := r.sessions[sid]
	if !ok {
		return errors.New("session is gone")
	}
	if cur, ok := r.hosts[rt.Host]; ok {
		if cur != sid {
			return ErrAddressTaken
		}
		return nil
	}
	r.hosts[rt.Host] = sid
	e.hosts = append(e.hosts, rt.Host)
	e.urls = append(e.urls, rt.URL)
	next := maps.Clone(*r.routes.Load())
	next[rt.Host] = rt
	r.routes.Store(&next)
	return nil
}

// BindTCP records that session sid serves port.
func (r *Registry) BindTCP(sid string, port int, url string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.sessions[sid]
	if !ok {
		return errors.New("session is gone")
	}
	if cur, ok := r.ports[port]; ok {
		if cur != sid {
			return ErrAddressTaken
		}
		return nil
	}
	r.ports[port] = sid
	e.ports = append(e.ports, port)
	e.urls = append(e.urls, url)
	return nil
}

// UnbindTCP releases a port (the edge could not listen on it).
func (r *Registry) UnbindTCP(sid string, port int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ports[port] != sid {
		return
	}
	delete(r.ports, port)
	if e, ok := r.sessions[sid]; ok {
		for i, p := range e.ports {
			if p == port {
				e.ports = append(e.ports[:i], e.ports[i+1:]...)
				e.urls = append(e.urls[:i:i], e.urls[i+1:]...)
				break
			}
		}
	}
}

// PortBound reports whether a live session serves port.
func (r *Registry) PortBound(port int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.ports[port]
	return ok
}

func (r *Registry) info(e *entry) Info {
	in := Info{ID: e.s.ID(), KeyID: e.s.KeyID(), RemoteAddr: e.s.RemoteAddr(), ConnectedAt: e.s.ConnectedAt()}
	if len(e.urls) > 0 {
		in.URL = e.urls[0]
	}
	return in
}

// ByKey returns the live sessions authenticated by key id.
func (r *Registry) ByKey(keyID string) []Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Info
	for _, e := range r.sessions {
		if e.s.KeyID() == keyID {
			out = append(out, r.info(e))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ConnectedAt.Before(out[j].ConnectedAt) })
	return out
}

// List returns every live session.
func (r *Registry) List() []Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Info, 0, len(r.sessions))
	for _, e := range r.sessions {
		out = append(out, r.info(e))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ConnectedAt.Before(out[j].ConnectedAt) })
	return out
}

// Count returns the number of live sessions.
func (r *Registry) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sessions)
}

// TerminateKey ends every session of key id with the given reason and
// returns how many there were. Terminate runs outside the lock: it talks to
// the agent and then calls Remove.
func (r *Registry) TerminateKey(keyID, code, reason string) int {
	r.mu.Lock()
	var victims []Session
	for _, e := range r.sessions {
		if e.s.KeyID() == keyID {
			victims = append(victims, e.s)
		}
	}
	r.mu.Unlock()
	terminateAll(victims, code, reason)
	return len(victims)
}

// TerminatePort ends the session that serves port, if any (its TCP
// endpoint was deleted).
func (r *Registry) TerminatePort(port int, code, reason string) {
	r.mu.Lock()
	var victims []Session
	if sid, ok := r.ports[port]; ok {
		victims = append(victims, r.sessions[sid].s)
	}
	r.mu.Unlock()
	terminateAll(victims, code, reason)
}

// TerminateHost ends the session that serves the HTTP host, if any (its
// domain was deleted).
func (r *Registry) TerminateHost(host, code, reason string) {
	r.mu.Lock()
	var victims []Session
	if sid, ok := r.hosts[host]; ok {
		victims = append(victims, r.sessions[sid].s)
	}
	r.mu.Unlock()
	terminateAll(victims, code, reason)
}

// TerminateAll ends every session (edge shutdown).
func (r *Registry) TerminateAll(code, reason string) {
	r.mu.Lock()
	victims := make([]Session, 0, len(r.sessions))
	for _, e := range r.sessions {
		victims = append(victims, e.s)
	}
	r.mu.Unlock()
	terminateAll(victims, code, reason)
}

// terminateAll ends sessions in parallel: each waits briefly for the agent
// to acknowledge, and shutdown should not take that long per session.
func terminateAll(ss []Session, code, reason string) {
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Terminate(code, reason)
		}()
	}
	wg.Wait()
}
