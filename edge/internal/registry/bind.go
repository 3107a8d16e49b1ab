package registry

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"code.tuna.am/tuna/k8s-operator/edge/internal/acl"
)

// Binding sessions to the addresses they serve: an HTTP host's or a TCP
// port's pool, joined under the key's rules (one address per key where it
// asks, another key's address refused), and the access policy of a
// reserved domain that a host's route carries.

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
