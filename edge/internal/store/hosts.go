package store

import (
	"fmt"
	"maps"

	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

// Host is what the store knows about one host name. It is answered from an
// in-memory index, so asking costs the same with 1 or 100,000 records: the
// public listener asks on every request for a host without a live route,
// which an anonymous client can send as fast as it likes.
type Host struct {
	// Keys counts the http tunnel keys limited to this host.
	Keys int
	// Reserved is set when the host is a reserved domain; Custom when that
	// domain is a custom domain, Verified when its DNS records were verified.
	Reserved, Custom, Verified bool
	// AccessPolicy is the id ("<owner>/<name>") of the reserved domain's
	// access policy, or "".
	AccessPolicy string
}

// Known reports whether the edge serves the host at all (reserved, or named
// by a tunnel key), connected or not.
func (h Host) Known() bool { return h.Keys > 0 || h.Reserved }

// Host looks a host name up in the index. name must be normalised
// (names.Normalize), as every stored name is.
func (s *Store) Host(name string) Host {
	idx := s.hosts.Load()
	h := Host{Keys: idx.keys[name]}
	if d, ok := idx.domains[name]; ok {
		h.Reserved, h.Custom, h.Verified, h.AccessPolicy = true, d.custom, d.verified, d.access
	}
	return h
}

type domainState struct {
	custom, verified bool
	access           string
}

// hostIndex is immutable once published; writers copy it, change the copy
// and swap it in, so readers never lock.
type hostIndex struct {
	keys    map[string]int // http tunnel-key address → number of keys
	domains map[string]domainState
}

func newHostIndex() *hostIndex {
	return &hostIndex{keys: map[string]int{}, domains: map[string]domainState{}}
}

func (x *hostIndex) clone() *hostIndex {
	return &hostIndex{keys: maps.Clone(x.keys), domains: maps.Clone(x.domains)}
}

// keyHost is the host a tunnel key contributes to the index: only http keys
// limited to one address name a host (tcp addresses are aliases or ports).
func keyHost(k TunnelKey) (string, bool) {
	return k.Address, k.Protocol == protocol.ProtocolHTTP && k.Address != ""
}

func (x *hostIndex) addKey(k TunnelKey, delta int) {
	h, ok := keyHost(k)
	if !ok {
		return
	}
	if n := x.keys[h] + delta; n > 0 {
		x.keys[h] = n
	} else {
		delete(x.keys, h)
	}
}

func (x *hostIndex) setDomain(d Domain) {
	x.domains[d.Name] = domainState{custom: d.Custom, verified: d.Verified, access: d.AccessPolicyID()}
}

// buildHostIndex builds the index from a bbolt database; it runs once, in
// Open (etcd's index is built from the watch's snapshot, watch.go).
func buildHostIndex(tx tx) (*hostIndex, error) {
	x := newHostIndex()
	tks, err := list[TunnelKey](tx, bucketTunnelKeys)
	if err != nil {
		return nil, fmt.Errorf("indexing tunnel keys: %w", err)
	}
	for _, k := range tks {
		x.addKey(k, 1)
	}
	ds, err := list[Domain](tx, bucketDomains)
	if err != nil {
		return nil, fmt.Errorf("indexing domains: %w", err)
	}
	for _, d := range ds {
		x.setDomain(d)
	}
	return x, nil
}

// updateHosts runs fn in a write transaction and, once it has committed,
// applies change to a copy of the index and publishes it. A failed
// transaction leaves the index as it was. hostsMu keeps the swaps in the
// order the database committed the writes.
//
// On etcd, the watch keeps the index, for this node's writes as for every
// other node's: a write waits until its change has come back through the
// watch, so the writer reads its own write in the index, as on bbolt.
func (s *Store) updateHosts(fn func(tx tx) error, change func(*hostIndex)) error {
	if s.etcd != nil {
		rev, err := s.be.update(fn)
		if err == nil && rev > 0 {
			s.etcd.w.wait(rev)
		}
		return err
	}
	s.hostsMu.Lock()
	defer s.hostsMu.Unlock()
	if err := s.write(fn); err != nil {
		return err
	}
	next := s.hosts.Load().clone()
	change(next)
	s.hosts.Store(next)
	return nil
}
