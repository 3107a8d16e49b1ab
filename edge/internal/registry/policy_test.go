package registry

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// policies is a reserved domain's policy as the store's index holds it:
// what a change writes before it calls DomainPolicyChanged.
type policies struct{ v atomic.Pointer[string] }

func (p *policies) set(id string) { p.v.Store(&id) }
func (p *policies) get(string) string {
	if v := p.v.Load(); v != nil {
		return *v
	}
	return ""
}

// A domain's policy that changes after a bind read the old one, and
// before the bind registered the address, is in force once both are done:
// the change waits for the bind and puts the new policy on the pool it
// made. (When the bind read the policy before taking the registry's lock,
// the change found no pool, and the address served with the old policy,
// or none, until the next change.)
func TestDomainPolicyChangedDuringBind(t *testing.T) {
	r := New()
	var src policies
	src.set("team-a/old")
	changed := make(chan struct{})
	var once sync.Once
	r.UseDomainPolicies(func(host string) string {
		read := src.get(host)
		once.Do(func() {
			// The change lands now: written to the store, then announced
			// from another goroutine, as the API does.
			written := make(chan struct{})
			go func() {
				src.set("team-a/new")
				close(written)
				r.DomainPolicyChanged(host)
				close(changed)
			}()
			<-written
		})
		return read
	})
	s := &sess{id: "s", key: "k", reg: r}
	r.Add(s, true)
	if err := bindHTTP(r, s, "app.example.com"); err != nil {
		t.Fatal(err)
	}
	<-changed
	if got := r.Lookup("app.example.com").Pool.AccessPolicy(); got != "team-a/new" {
		t.Fatalf("the address is guarded by %q after the change to team-a/new", got)
	}
}

// Binds, unbinds and policy changes of one host race (run with -race):
// whenever all have settled, the live address has the policy the store
// says, never an older one.
func TestDomainPolicyBindRace(t *testing.T) {
	r := New()
	var src policies
	r.UseDomainPolicies(src.get)
	const host = "app.example.com"
	for round := range 200 {
		s := &sess{id: fmt.Sprintf("s%d", round), key: "k", reg: r}
		r.Add(s, true)
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := bindHTTP(r, s, host); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			for i := range 3 {
				src.set(fmt.Sprintf("team-a/p%d-%d", round, i))
				r.DomainPolicyChanged(host)
			}
		})
		wg.Wait()
		rt := r.Lookup(host)
		if rt == nil {
			t.Fatalf("round %d: the host is not bound", round)
		}
		if got, want := rt.Pool.AccessPolicy(), src.get(host); got != want {
			t.Fatalf("round %d: the address is guarded by %q, the store says %q", round, got, want)
		}
		r.Remove(s.id)
	}
}
