package registry

import (
	"crypto/rand"
	"encoding/hex"
	"slices"
)

// What asks which sessions are live (the operator's check of its agents'
// entries, every few seconds) reads what changed since its last look, not
// every session again: the registry numbers each session that begins or
// ends and keeps the latest of those changes.

// DefaultKeptChanges is how many of the latest session changes a registry
// keeps for readers that follow them: a reader whose last look is older
// reads every live session again.
const DefaultKeptChanges = 8192

// Keyed is a session that may be of a tunnel key: the list of sessions
// holds those alone, by their key's owner and labels.
type Keyed interface {
	// TunnelKey is the session's tunnel key's owner and labels; ok is
	// false for a session of an API key.
	TunnelKey() (owner string, labels map[string]string, ok bool)
}

// SessionChange is a session that began (live) or ended, numbered in the
// order the registry saw them, with its tunnel key's owner and labels
// (Tunnel false: a session of an API key).
type SessionChange struct {
	Seq              uint64
	KeyID, SessionID string
	Ended            bool
	Tunnel           bool
	Owner            string
	Labels           map[string]string
}

// changeOf is what a change of s says of its key.
func changeOf(s Session) SessionChange {
	c := SessionChange{KeyID: s.KeyID(), SessionID: s.ID()}
	if k, ok := s.(Keyed); ok {
		c.Owner, c.Labels, c.Tunnel = k.TunnelKey()
	}
	return c
}

// changeLog holds the latest changes, in order, numbered without gaps.
type changeLog struct {
	run     string // this registry's, so a number from another run is not taken for one of this
	seq     uint64 // the last change's number
	keep    int
	changes []SessionChange
}

func newChangeLog() changeLog {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return changeLog{run: hex.EncodeToString(b), keep: DefaultKeptChanges}
}

func (l *changeLog) record(s Session, ended bool) {
	l.seq++
	c := changeOf(s)
	c.Seq, c.Ended = l.seq, ended
	// Dropped in halves, so each change is copied about once.
	if len(l.changes) >= 2*l.keep {
		l.changes = slices.Clone(l.changes[len(l.changes)-l.keep:])
	}
	l.changes = append(l.changes, c)
}

// Run names this registry: the numbers of its changes mean nothing to
// another (an edge that restarted).
func (r *Registry) Run() string { return r.log.run }

// KeepChanges sets how many changes are kept (default DefaultKeptChanges).
func (r *Registry) KeepChanges(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log.keep = max(n, 1)
}

// ChangesSince returns the changes after number since, and the number of
// the last; ok is false when they are not all kept any more (or since is
// not one of this registry's), and the caller reads LiveSessions instead.
func (r *Registry) ChangesSince(since uint64) (changes []SessionChange, last uint64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := &r.log
	oldest := l.seq - uint64(len(l.changes)) // the number before the first kept
	if since > l.seq || since < oldest {
		return nil, l.seq, false
	}
	return slices.Clone(l.changes[since-oldest:]), l.seq, true
}

// LiveSessions returns every live session as a change that began it, and
// the number of the last change they include.
func (r *Registry) LiveSessions() (live []SessionChange, last uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	live = make([]SessionChange, 0, len(r.sessions))
	for _, e := range r.sessions {
		live = append(live, changeOf(e.s))
	}
	return live, r.log.seq
}
