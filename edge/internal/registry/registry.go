// Package registry tracks the live tunnel sessions and what they are bound
// to. An address is served by a pool of sessions of one key (see Pool). The HTTP route table is an immutable map behind an atomic pointer:
// public requests look hosts up without taking a lock, and the rare writers
// (bind, session end) copy the map under a mutex and swap it.
package registry

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/internal/names"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

var (
	// ErrAddressTaken is returned when a session of another key holds an
	// address.
	ErrAddressTaken = errors.New("address is bound by a session of another key")
	// ErrKeyBusy is returned when a key's pool of sessions is full.
	ErrKeyBusy = errors.New("tunnel key has as many live sessions as its pool allows")
	// ErrKeyBoundElsewhere is returned when a session of a one-address key
	// binds an address other than the one its key's other sessions serve.
	ErrKeyBoundElsewhere = errors.New("the key's other sessions serve another address")
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
	// Load is the number of public connections the session carries now.
	Load() int
	// Draining reports whether the agent asked for no new connections.
	Draining() bool
	// Terminate tells the agent why and closes the session.
	Terminate(code, reason string)
}

// Route is a public HTTP host and the pool of sessions that serve it.
type Route struct {
	Host string
	URL  string
	Pool *Pool
}

// Info describes a live session for the API.
type Info struct {
	ID          string
	KeyID       string
	URL         string
	RemoteAddr  string
	ConnectedAt time.Time
	Draining    bool
}

type entry struct {
	s Session
	// oneAddress: the session's key serves one address, whichever of its
	// sessions binds it.
	oneAddress bool
	addrs      []string // "http:<host>" or "tcp:<port>", in bind order
	urls       []string
	hosts      []string
	ports      []int
}

// claim is a tunnel key's place in its pool, from the password check on.
type claim struct {
	sess     Session       // nil until the handshake completes (Add)
	released chan struct{} // closed when the claim is dropped
}

// Holder is a session that holds a place in a key's pool.
type Holder struct {
	// Session is nil while its handshake is still running.
	Session Session
	// Released is closed when the place is given back.
	Released <-chan struct{}
}

// Registry is safe for concurrent use.
type Registry struct {
	mu       sync.Mutex
	sessions map[string]*entry // by session id
	// byKey indexes sessions by the key that authenticated them, so what
	// asks about one key (a bind's address check, the API's list of a
	// key's sessions, a revocation) costs the same with 10 or 50,000
	// sessions.
	byKey  map[string]map[string]*entry
	claims map[string]map[string]*claim // tunnel key id -> session id -> claim
	hosts  map[string]*Pool             // http host
	ports  map[int]*Pool                // tcp port
	// routes is what Lookup reads without the lock, on every public
	// request; a bind or a removal changes one entry, whatever the
	// number of hosts (a copied map would cost each bind all of them).
	routes sync.Map      // host -> *Route
	pools  atomic.Uint64 // pool ids
	// domainPolicy reads a reserved domain's access policy (UseDomainPolicies).
	domainPolicy func(host string) string
	// log numbers the sessions that begin and end (changes.go).
	log changeLog
}

// New returns an empty registry.
func New() *Registry {
	r := &Registry{
		sessions: map[string]*entry{},
		byKey:    map[string]map[string]*entry{},
		claims:   map[string]map[string]*claim{},
		hosts:    map[string]*Pool{},
		ports:    map[int]*Pool{},
		log:      newChangeLog(),
	}
	return r
}

// Lookup returns the route of host (lower case, no port) or nil. Lock-free.
func (r *Registry) Lookup(host string) *Route {
	if rt, ok := r.routes.Load(host); ok {
		return rt.(*Route)
	}
	return nil
}

// Resolve finds the route that serves a request for host: its own, else
// that of the most specific wildcard covering it ("*.parent", any depth).
// A name somebody holds (held: reserved, or named by a tunnel key) stops
// the walk even with no live route, and is returned as offline: its
// requests answer "not connected" and never reach a wildcard, which may
// be another owner's. Both nil and "": nothing serves host. Lock-free.
func (r *Registry) Resolve(host string, held func(name string) bool) (rt *Route, offline string) {
	if rt := r.Lookup(host); rt != nil {
		return rt, ""
	}
	if held != nil && held(host) {
		return nil, host
	}
	names.Covering(host, func(w string) bool {
		if rt = r.Lookup(w); rt == nil && held != nil && held(w) {
			offline = w
		}
		return rt == nil && offline == ""
	})
	return rt, offline
}

// ClaimKey reserves a place in tunnel key keyID's pool for session sid; the
// pool holds at most limit sessions (limit < 1 counts as 1). It is called
// during authentication, before the session exists, so simultaneous logins
// with one key cannot overfill the pool.
func (r *Registry) ClaimKey(keyID, sid string, limit int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs := r.claims[keyID]
	if _, ok := cs[sid]; ok {
		return nil
	}
	if len(cs) >= max(limit, 1) {
		return ErrKeyBusy
	}
	if cs == nil {
		cs = map[string]*claim{}
		r.claims[keyID] = cs
	}
	cs[sid] = &claim{released: make(chan struct{})}
	return nil
}

// Holders returns the sessions that hold places in keyID's pool.
func (r *Registry) Holders(keyID string) []Holder {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Holder, 0, len(r.claims[keyID]))
	for _, c := range r.claims[keyID] {
		out = append(out, Holder{Session: c.sess, Released: c.released})
	}
	return out
}

// ReleaseClaim undoes ClaimKey when the handshake fails after auth.
func (r *Registry) ReleaseClaim(keyID, sid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.releaseLocked(keyID, sid)
}

func (r *Registry) releaseLocked(keyID, sid string) {
	cs := r.claims[keyID]
	if c, ok := cs[sid]; ok {
		delete(cs, sid)
		if len(cs) == 0 {
			delete(r.claims, keyID)
		}
		close(c.released)
	}
}

// Add registers a session after its handshake. oneAddress keeps all the
// sessions of its key to one address (tunnel keys).
func (r *Registry) Add(s Session, oneAddress bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := &entry{s: s, oneAddress: oneAddress}
	r.sessions[s.ID()] = e
	r.log.record(s, false)
	ks := r.byKey[s.KeyID()]
	if ks == nil {
		ks = map[string]*entry{}
		r.byKey[s.KeyID()] = ks
	}
	ks[s.ID()] = e
	if c, ok := r.claims[s.KeyID()][s.ID()]; ok {
		c.sess = s
	}
}

// Remove forgets a session, its claim and its place in its pools, in one
// step: once a session is gone from the table its key may connect again.
// An address whose pool is left empty is unrouted.
func (r *Registry) Remove(sid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.sessions[sid]
	if !ok {
		return
	}
	delete(r.sessions, sid)
	r.log.record(e.s, true)
	if ks := r.byKey[e.s.KeyID()]; ks != nil {
		delete(ks, sid)
		if len(ks) == 0 {
			delete(r.byKey, e.s.KeyID())
		}
	}
	r.releaseLocked(e.s.KeyID(), sid)
	for _, p := range e.ports {
		r.leavePortLocked(p, sid)
	}
	if len(e.hosts) == 0 {
		return
	}
	for _, h := range e.hosts {
		if pool := r.hosts[h]; pool != nil {
			pool.remove(sid)
			if pool.Len() == 0 {
				delete(r.hosts, h)
				r.routes.Delete(h)
			}
		}
	}
}

// OthersServe reports whether every address the session sid serves has
// another member in its pool that is not draining: the session may then
// leave without the address going unserved.
func (r *Registry) OthersServe(sid string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.sessions[sid]
	if !ok {
		return true
	}
	var pools []*Pool
	for _, h := range e.hosts {
		pools = append(pools, r.hosts[h])
	}
	for _, p := range e.ports {
		pools = append(pools, r.ports[p])
	}
	for _, pool := range pools {
		if pool == nil {
			continue
		}
		other := false
		for _, m := range pool.Sessions() {
			if m.ID() != sid && !m.Draining() {
				other = true
				break
			}
		}
		if !other {
			return false
		}
	}
	return true
}

func (r *Registry) leavePortLocked(port int, sid string) {
	if pool := r.ports[port]; pool != nil {
		pool.remove(sid)
		if pool.Len() == 0 {
			delete(r.ports, port)
		}
	}
}
