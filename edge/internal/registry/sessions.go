package registry

import (
	"sort"
	"sync"
)

// The live sessions as the API and the edge's shutdown see them: listed,
// counted, and ended by key, address or all at once.

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
