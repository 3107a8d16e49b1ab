// Package registry tracks the live tunnel sessions and what they are bound
// to. An address is served by a pool of sessions of one key (see Pool). The HTTP route table is an immutable map behind an atomic pointer:
// public requests look hosts up without taking a lock, and the rare writers
// (bind, session end) copy the map under a mutex and swap it.
package registry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/internal/acl"
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
}

// New returns an empty registry.
func New() *Registry {
	r := &Registry{
		sessions: map[string]*entry{},
		byKey:    map[string]map[string]*entry{},
		claims:   map[string]map[string]*claim{},
		hosts:    map[string]*Pool{},
		ports:    map[int]*Pool{},
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

// KeyAddress is the address ("http:<host>" or "tcp:<port>") that a
// one-address key's sessions serve, or "" when none is bound.
func (r *Registry) KeyAddress(keyID string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keyAddressLocked(keyID)
}

func (r *Registry) keyAddressLocked(keyID string) string {
	for _, e := range r.byKey[keyID] {
		if e.oneAddress && len(e.addrs) > 0 {
			return e.addrs[0]
		}
	}
	return ""
}

// joinCheckLocked checks that session e may serve addr through pool (nil: nobody
// serves addr yet) and reports whether it already does.
func (r *Registry) joinCheckLocked(e *entry, addr string, pool *Pool) (already bool, err error) {
	sid, key := e.s.ID(), e.s.KeyID()
	if pool != nil {
		if pool.key != key {
			return false, ErrAddressTaken
		}
		if pool.has(sid) {
			return true, nil
		}
	}
	if e.oneAddress {
		if cur := r.keyAddressLocked(key); cur != "" && cur != addr {
			return false, ErrKeyBoundElsewhere
		}
	}
	return false, nil
}

func (r *Registry) newPoolLocked(key string) *Pool {
	return newPool(fmt.Sprintf("pool_%d", r.pools.Add(1)), key)
}

// BindHTTP adds session s to the pool that serves host, creating it when
// nobody serves host; ErrAddressTaken if a session of another key serves
// it. Binding the same host again from the same session is a no-op. list
// becomes the host's client filter.
func (r *Registry) BindHTTP(s Session, host, url string, list *acl.List, access Access) (*Route, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.sessions[s.ID()]
	if !ok {
		return nil, errSessionGone
	}
	pool := r.hosts[host]
	already, err := r.joinCheckLocked(e, "http:"+host, pool)
	if err != nil {
		return nil, err
	}
	if already {
		return r.Lookup(host), nil
	}
	if pool == nil {
		pool = r.newPoolLocked(s.KeyID())
		r.hosts[host] = pool
	}
	pool.configure(list, "", access.Bound, r.domainPolicyLocked(host))
	pool.add(s)
	e.addrs = append(e.addrs, "http:"+host)
	e.hosts = append(e.hosts, host)
	e.urls = append(e.urls, url)
	rt := r.Lookup(host)
	if rt == nil {
		// Under the lock: no other bind or removal of host runs now.
		rt = &Route{Host: host, URL: url, Pool: pool}
		r.routes.Store(host, rt)
	}
	return rt, nil
}

var errSessionGone = errors.New("session is gone")

// UseDomainPolicies sets where the registry reads the access policy id of
// a reserved domain ("" for none): the store's index of hosts, which a
// change is in before its writer calls DomainPolicyChanged. The registry
// reads it under its lock, at each HTTP bind and at each
// DomainPolicyChanged, so a change that lands while a bind runs is in
// force whichever takes the lock first: the bind reads it, or the change
// finds the pool the bind made. Call it before the first bind.
func (r *Registry) UseDomainPolicies(f func(host string) string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.domainPolicy = f
}

func (r *Registry) domainPolicyLocked(host string) string {
	if r.domainPolicy == nil {
		return ""
	}
	return r.domainPolicy(host)
}

// DomainPolicyChanged puts the access policy that the reserved domain host
// has now in force on the live address host, if one serves it.
func (r *Registry) DomainPolicyChanged(host string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if pool := r.hosts[host]; pool != nil {
		pool.setDomainPolicy(r.domainPolicyLocked(host))
	}
}

// BindTCP adds session sid to the pool that serves port (see BindHTTP);
// list and proxy become the endpoint's client filter and PROXY protocol.
func (r *Registry) BindTCP(sid string, port int, url string, list *acl.List, proxy string, access Access) (*Pool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.sessions[sid]
	if !ok {
		return nil, errSessionGone
	}
	addr := "tcp:" + strconv.Itoa(port)
	pool := r.ports[port]
	already, err := r.joinCheckLocked(e, addr, pool)
	if err != nil || already {
		return pool, err
	}
	if pool == nil {
		pool = r.newPoolLocked(e.s.KeyID())
		r.ports[port] = pool
	}
	pool.configure(list, proxy, access.Bound, "")
	pool.add(e.s)
	e.addrs = append(e.addrs, addr)
	e.ports = append(e.ports, port)
	e.urls = append(e.urls, url)
	return pool, nil
}

// UnbindTCP takes session sid out of port's pool (the edge could not listen
// on the port).
func (r *Registry) UnbindTCP(sid string, port int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.sessions[sid]
	if !ok || !slices.Contains(e.ports, port) {
		return
	}
	r.leavePortLocked(port, sid)
	i := slices.Index(e.ports, port)
	e.ports = slices.Delete(e.ports, i, i+1)
	j := slices.Index(e.addrs, "tcp:"+strconv.Itoa(port))
	e.addrs = slices.Delete(e.addrs, j, j+1)
	e.urls = slices.Delete(e.urls, j, j+1)
}

// PortBound reports whether a live session serves port.
func (r *Registry) PortBound(port int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.ports[port]
	return ok
}

// PortPool is the pool that serves port, or nil.
func (r *Registry) PortPool(port int) *Pool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ports[port]
}

func (r *Registry) info(e *entry) Info {
	in := Info{ID: e.s.ID(), KeyID: e.s.KeyID(), RemoteAddr: e.s.RemoteAddr(), ConnectedAt: e.s.ConnectedAt(), Draining: e.s.Draining()}
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
	for _, e := range r.byKey[keyID] {
		out = append(out, r.info(e))
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

// Load is the number of public connections all sessions carry.
func (r *Registry) Load() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.sessions {
		n += e.s.Load()
	}
	return n
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
	for _, e := range r.byKey[keyID] {
		victims = append(victims, e.s)
	}
	r.mu.Unlock()
	terminateAll(victims, code, reason)
	return len(victims)
}

// TerminatePort ends the sessions that serve port, if any (its TCP
// endpoint was deleted).
func (r *Registry) TerminatePort(port int, code, reason string) {
	r.mu.Lock()
	var victims []Session
	if pool := r.ports[port]; pool != nil {
		victims = pool.Sessions()
	}
	r.mu.Unlock()
	terminateAll(victims, code, reason)
}

// TerminateHost ends the sessions that serve the HTTP host, if any (its
// domain was deleted).
func (r *Registry) TerminateHost(host, code, reason string) {
	r.mu.Lock()
	var victims []Session
	if pool := r.hosts[host]; pool != nil {
		victims = pool.Sessions()
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
