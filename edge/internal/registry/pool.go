package registry

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync/atomic"

	"code.tuna.am/tuna/k8s-operator/edge/internal/acl"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

// Pool is the set of live sessions that serve one public address. Sessions
// of one key may share an address (several agent replicas), so that an
// agent's restart, drain or crash does not take the address down while
// another replica is connected. The members are an immutable slice behind
// an atomic pointer: picking a session for a public connection takes no
// lock; the registry replaces the slice under its own mutex.
type Pool struct {
	id  string // unique for the pool's life: the owner of a TCP listener
	key string // the key whose sessions may join
	// Conns counts the address's public connections in flight, for the
	// per-tunnel connection limit, across all members.
	Conns   Slots
	members atomic.Pointer[[]Session]
	next    atomic.Uint64
	acl     atomic.Pointer[acl.List]
	proxy   atomic.Pointer[string]
	access  atomic.Pointer[accessIDs]
}

// accessIDs are the access policies that guard the address: the one the
// latest member's bind named, and its reserved domain's, which wins.
type accessIDs struct{ bound, domain, effective string }

func (a accessIDs) resolve() *accessIDs {
	a.effective = a.bound
	if a.domain != "" {
		a.effective = a.domain
	}
	return &a
}

func newPool(id, key string) *Pool {
	p := &Pool{id: id, key: key}
	p.members.Store(&[]Session{})
	none := ""
	p.proxy.Store(&none)
	p.access.Store(&accessIDs{})
	return p
}

// ID identifies the pool; a new pool for the same address gets a new ID.
func (p *Pool) ID() string { return p.id }

// KeyID is the key whose sessions form the pool.
func (p *Pool) KeyID() string { return p.key }

// Sessions returns the members, oldest first.
func (p *Pool) Sessions() []Session { return *p.members.Load() }

// Len is the number of members.
func (p *Pool) Len() int { return len(*p.members.Load()) }

// ACL is the client filter of the address: the one the latest member sent
// with its bind, so a rolling update of the agents changes it with the first
// new replica.
func (p *Pool) ACL() *acl.List { return p.acl.Load() }

// AccessPolicy is the id of the access policy that guards the address
// ("<owner>/<name>"), or "" for none: the reserved domain's, else the one
// the latest member bound with.
func (p *Pool) AccessPolicy() string { return p.access.Load().effective }

// ProxyProtocol is the PROXY protocol version the latest member asked for
// ("" for none; TCP only).
func (p *Pool) ProxyProtocol() string { return *p.proxy.Load() }

// Pick returns the session that should carry a new public connection, or
// nil if there is none: the least loaded member that is not draining, ties
// broken round robin so that idle members take turns. When every member is
// draining, the least loaded of them: a draining session still serves until
// it closes, and that beats refusing the client. skip lists sessions that
// already failed this connection.
func (p *Pool) Pick(skip ...Session) Session {
	ms := *p.members.Load()
	n := len(ms)
	if n == 0 {
		return nil
	}
	start := int(p.next.Add(1) % uint64(n))
	var best, bestDraining Session
	bestLoad, bestDrainingLoad := 0, 0
	for i := range n {
		s := ms[(start+i)%n]
		if slices.Contains(skip, s) {
			continue
		}
		load := s.Load()
		if s.Draining() {
			if bestDraining == nil || load < bestDrainingLoad {
				bestDraining, bestDrainingLoad = s, load
			}
			continue
		}
		if best == nil || load < bestLoad {
			best, bestLoad = s, load
		}
	}
	if best != nil {
		return best
	}
	return bestDraining
}

// Open opens a forward channel on one of the pool's sessions (see Pick),
// trying the next one when a session fails, so a session that just died
// costs the client nothing but a retry. A limit refusal or the end of ctx
// is returned at once: another session would not change it, or there is no
// time left.
func (p *Pool) Open(ctx context.Context, info protocol.ForwardInfo) (net.Conn, error) {
	var tried []Session
	var last error
	for {
		s := p.Pick(tried...)
		if s == nil {
			if last == nil {
				last = errors.New("no live session serves the tunnel")
			}
			return nil, last
		}
		c, err := s.OpenForward(ctx, info)
		if err == nil {
			return c, nil
		}
		var le *LimitError
		if errors.As(err, &le) || ctx.Err() != nil {
			return nil, err
		}
		last = err
		tried = append(tried, s)
	}
}

// add and remove run under the registry's mutex.
func (p *Pool) add(s Session) {
	next := append(slices.Clone(*p.members.Load()), s)
	p.members.Store(&next)
}

func (p *Pool) remove(sid string) {
	next := slices.DeleteFunc(slices.Clone(*p.members.Load()), func(s Session) bool { return s.ID() == sid })
	p.members.Store(&next)
}

func (p *Pool) has(sid string) bool {
	return slices.ContainsFunc(*p.members.Load(), func(s Session) bool { return s.ID() == sid })
}

// configure, and setDomainPolicy, run under the registry's mutex: domain
// is the reserved domain's policy as the registry read it there.
func (p *Pool) configure(list *acl.List, proxy, bound, domain string) {
	p.acl.Store(list)
	p.proxy.Store(&proxy)
	p.access.Store(accessIDs{bound: bound, domain: domain}.resolve())
}

// Access names the access policy a bind puts in force on its address,
// before the address serves: Bound, the bind's own. A reserved domain's
// policy, which wins, the registry reads itself (UseDomainPolicies).
type Access struct{ Bound string }

// setDomainPolicy changes the domain's policy of a live address.
func (p *Pool) setDomainPolicy(id string) {
	cur := *p.access.Load()
	cur.domain = id
	p.access.Store(cur.resolve())
}
