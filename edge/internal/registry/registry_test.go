package registry

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

// sess is a minimal Session for exercising the registry's bookkeeping.
type sess struct {
	id, key    string
	mu         sync.Mutex
	terminated string
	reg        *Registry
	load       atomic.Int64
	draining   atomic.Bool
}

func (s *sess) ID() string             { return s.id }
func (s *sess) KeyID() string          { return s.key }
func (s *sess) RemoteAddr() string     { return "127.0.0.1:1" }
func (s *sess) ConnectedAt() time.Time { return time.Unix(0, 0) }
func (s *sess) Load() int              { return int(s.load.Load()) }
func (s *sess) Draining() bool         { return s.draining.Load() }
func (s *sess) OpenForward(context.Context, protocol.ForwardInfo) (net.Conn, error) {
	return nil, errors.New("unused")
}
func (s *sess) Terminate(code, _ string) {
	s.mu.Lock()
	s.terminated = code
	s.mu.Unlock()
	s.reg.Remove(s.id)
}

func (s *sess) code() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.terminated
}

func bindHTTP(r *Registry, s Session, host string) error {
	_, err := r.BindHTTP(s, host, "http://"+host, nil, Access{})
	return err
}

func bindTCP(r *Registry, s Session, port int) error {
	_, err := r.BindTCP(s.ID(), port, "tcp://x", nil, "", Access{})
	return err
}

func TestRoutesPoolsAndClaims(t *testing.T) {
	r := New()
	a := &sess{id: "a", key: "k1", reg: r}
	a2 := &sess{id: "a2", key: "k1", reg: r}
	a3 := &sess{id: "a3", key: "k1", reg: r}
	b := &sess{id: "b", key: "k2", reg: r}
	steps := []struct {
		name string
		do   func() error
		want error
	}{
		{"claim k1 for a", func() error { return r.ClaimKey("k1", "a", 2) }, nil},
		{"claim k1 again for a", func() error { return r.ClaimKey("k1", "a", 2) }, nil},
		{"claim k1 for a2", func() error { return r.ClaimKey("k1", "a2", 2) }, nil},
		{"claim k1 past the pool size", func() error { return r.ClaimKey("k1", "a3", 2) }, ErrKeyBusy},
		{"pool size below one counts as one", func() error { return r.ClaimKey("k2", "b", 0) }, nil},
		{"second claim on a pool of one", func() error { return r.ClaimKey("k2", "x", 0) }, ErrKeyBusy},
		{"add a", func() error { r.Add(a, true); return nil }, nil},
		{"add a2", func() error { r.Add(a2, true); return nil }, nil},
		{"add a3", func() error { r.Add(a3, true); return nil }, nil},
		{"add b", func() error { r.Add(b, true); return nil }, nil},
		{"a binds web", func() error { return bindHTTP(r, a, "web") }, nil},
		{"a binds web again", func() error { return bindHTTP(r, a, "web") }, nil},
		{"a2 of the same key joins web", func() error { return bindHTTP(r, a2, "web") }, nil},
		{"b of another key binds web", func() error { return bindHTTP(r, b, "web") }, ErrAddressTaken},
		{"a3 of a one-address key binds another host", func() error { return bindHTTP(r, a3, "other") }, ErrKeyBoundElsewhere},
		{"a3 of a one-address key binds a port", func() error { return bindTCP(r, a3, 5000) }, ErrKeyBoundElsewhere},
		{"b binds port", func() error { return bindTCP(r, b, 5000) }, nil},
		{"a binds b's port", func() error { return bindTCP(r, a, 5000) }, ErrAddressTaken},
		{"gone session binds", func() error { return bindHTTP(r, &sess{id: "gone", key: "k1"}, "web") }, errSessionGone},
	}
	for _, s := range steps {
		if err := s.do(); !errors.Is(err, s.want) {
			t.Fatalf("%s: %v, want %v", s.name, err, s.want)
		}
	}
	rt := r.Lookup("web")
	if rt == nil || rt.Pool.Len() != 2 || rt.Pool.KeyID() != "k1" {
		t.Fatalf("web route = %+v, want a pool of a and a2", rt)
	}
	if got := r.KeyAddress("k1"); got != "http:web" {
		t.Fatalf("KeyAddress(k1) = %q", got)
	}
	if in := r.ByKey("k1"); len(in) != 3 || in[0].URL == "" && in[1].URL == "" {
		t.Fatalf("ByKey = %+v", in)
	}
	// One member leaving keeps the address routed by the other.
	r.Remove("a")
	if rt := r.Lookup("web"); rt == nil || rt.Pool.Len() != 1 || rt.Pool.Sessions()[0] != a2 {
		t.Fatalf("after a left: %+v", rt)
	}
	if err := r.ClaimKey("k1", "c", 2); err != nil {
		t.Fatalf("claim after a member left: %v", err)
	}
	if n := r.TerminateKey("k1", protocol.CodeKeyRevoked, "revoked"); n != 2 || a2.code() != protocol.CodeKeyRevoked {
		t.Fatalf("TerminateKey = %d, a2 %q", n, a2.code())
	}
	if r.Lookup("web") != nil {
		t.Fatal("web still routed after its pool emptied")
	}
	if in := r.ByKey("k1"); len(in) != 0 || len(r.byKey) != 1 {
		t.Fatalf("after k1's sessions ended: ByKey(k1) = %+v, index of %d keys, want only k2's", in, len(r.byKey))
	}
	if err := bindHTTP(r, b, "web"); !errors.Is(err, ErrKeyBoundElsewhere) {
		t.Fatalf("b (bound to port 5000) binds web: %v", err)
	}
	r.TerminateAll(protocol.CodeEdgeShuttingDown, "bye")
	if r.Count() != 0 || b.code() != protocol.CodeEdgeShuttingDown || r.PortBound(5000) {
		t.Fatalf("after TerminateAll: %d sessions, b %q", r.Count(), b.code())
	}
	if len(r.byKey) != 0 {
		t.Fatalf("the index by key still holds %d keys after every session left", len(r.byKey))
	}
}

func TestAPIKeySessionsMayServeSeveralAddresses(t *testing.T) {
	r := New()
	a := &sess{id: "a", key: "api", reg: r}
	a2 := &sess{id: "a2", key: "api", reg: r}
	r.Add(a, false)
	r.Add(a2, false)
	for _, step := range []struct {
		s    Session
		host string
	}{{a, "one"}, {a, "two"}, {a2, "two"}, {a2, "three"}} {
		if err := bindHTTP(r, step.s, step.host); err != nil {
			t.Fatalf("%s binds %s: %v", step.s.ID(), step.host, err)
		}
	}
	for host, want := range map[string]int{"one": 1, "two": 2, "three": 1} {
		if rt := r.Lookup(host); rt == nil || rt.Pool.Len() != want {
			t.Fatalf("%s: %+v, want %d members", host, rt, want)
		}
	}
}

func TestPick(t *testing.T) {
	mk := func(loads []int, draining []bool) (*Pool, []*sess) {
		p := newPool("p", "k")
		var ss []*sess
		for i, l := range loads {
			s := &sess{id: string(rune('a' + i)), key: "k"}
			s.load.Store(int64(l))
			s.draining.Store(draining[i])
			p.add(s)
			ss = append(ss, s)
		}
		return p, ss
	}
	cases := []struct {
		name     string
		loads    []int
		draining []bool
		skip     []int
		want     []int // acceptable picks
	}{
		{"empty pool", nil, nil, nil, nil},
		{"least loaded wins", []int{3, 1, 2}, []bool{false, false, false}, nil, []int{1}},
		{"draining members are skipped", []int{0, 5, 9}, []bool{true, false, false}, nil, []int{1}},
		{"skipped members are not picked", []int{0, 5, 9}, []bool{false, false, false}, []int{0}, []int{1}},
		{"all draining: least loaded draining", []int{4, 2}, []bool{true, true}, nil, []int{1}},
		{"all skipped", []int{0, 0}, []bool{false, false}, []int{0, 1}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, ss := mk(c.loads, c.draining)
			var skip []Session
			for _, i := range c.skip {
				skip = append(skip, ss[i])
			}
			got := p.Pick(skip...)
			if c.want == nil {
				if got != nil {
					t.Fatalf("Pick = %s, want none", got.ID())
				}
				return
			}
			if got == nil || got != Session(ss[c.want[0]]) {
				t.Fatalf("Pick = %v, want %s", got, ss[c.want[0]].id)
			}
		})
	}
	t.Run("equal loads take turns", func(t *testing.T) {
		p, _ := mk([]int{0, 0, 0}, []bool{false, false, false})
		seen := map[string]int{}
		for range 30 {
			seen[p.Pick().ID()]++
		}
		for _, id := range []string{"a", "b", "c"} {
			if seen[id] != 10 {
				t.Fatalf("picks = %v, want 10 each", seen)
			}
		}
	})
}

func TestClaimIsReleasedWithTheSessionInOneStep(t *testing.T) {
	r := New()
	if hs := r.Holders("k"); len(hs) != 0 {
		t.Fatal("a claim nobody made")
	}
	if err := r.ClaimKey("k", "a", 1); err != nil {
		t.Fatal(err)
	}
	hs := r.Holders("k")
	if len(hs) != 1 || hs[0].Session != nil {
		t.Fatalf("pending claim: %+v; want one, no session yet", hs)
	}
	released := hs[0].Released
	a := &sess{id: "a", key: "k", reg: r}
	r.Add(a, true)
	if hs := r.Holders("k"); hs[0].Session != a {
		t.Fatalf("holder after Add = %v", hs[0].Session)
	}
	select {
	case <-released:
		t.Fatal("released before the session ended")
	default:
	}
	r.Remove("a")
	select {
	case <-released:
	default:
		t.Fatal("Remove did not release the claim")
	}
	if r.Count() != 0 {
		t.Fatal("session still in the table")
	}
	if err := r.ClaimKey("k", "b", 1); err != nil {
		t.Fatalf("claim right after Remove: %v", err)
	}
	// A failed handshake gives its claim back too.
	released = r.Holders("k")[0].Released
	r.ReleaseClaim("k", "other") // not a holder: no effect
	if len(r.Holders("k")) != 1 {
		t.Fatal("ReleaseClaim by a non-holder dropped the claim")
	}
	r.ReleaseClaim("k", "b")
	select {
	case <-released:
	default:
		t.Fatal("ReleaseClaim did not release")
	}
}

func TestTerminatePortAndHostEndTheWholePool(t *testing.T) {
	r := New()
	a := &sess{id: "a", key: "k1", reg: r}
	a2 := &sess{id: "a2", key: "k1", reg: r}
	b := &sess{id: "b", key: "k2", reg: r}
	c := &sess{id: "c", key: "k3", reg: r}
	c2 := &sess{id: "c2", key: "k3", reg: r}
	for _, s := range []*sess{a, a2, b, c, c2} {
		r.Add(s, true)
	}
	for _, s := range []*sess{a, a2} {
		if err := bindTCP(r, s, 5000); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []*sess{c, c2} {
		if err := bindHTTP(r, s, "web"); err != nil {
			t.Fatal(err)
		}
	}
	r.TerminatePort(5001, protocol.CodeAddressNotFound, "nobody serves it")
	r.TerminatePort(5000, protocol.CodeAddressNotFound, "deleted")
	if a.code() != protocol.CodeAddressNotFound || a2.code() != protocol.CodeAddressNotFound || b.code() != "" {
		t.Fatalf("terminated: a %q, a2 %q, b %q; want a and a2", a.code(), a2.code(), b.code())
	}
	if r.PortBound(5000) || r.Count() != 3 {
		t.Fatalf("after TerminatePort: port bound %v, %d sessions", r.PortBound(5000), r.Count())
	}
	r.TerminateHost("web", protocol.CodeAddressNotFound, "deleted")
	if c.code() == "" || c2.code() == "" || r.Lookup("web") != nil || r.Count() != 1 {
		t.Fatalf("after TerminateHost: c %q, c2 %q, %d sessions", c.code(), c2.code(), r.Count())
	}
}

func TestUnbindTCPLeavesThePool(t *testing.T) {
	r := New()
	a := &sess{id: "a", key: "k", reg: r}
	a2 := &sess{id: "a2", key: "k", reg: r}
	r.Add(a, true)
	r.Add(a2, true)
	_ = bindTCP(r, a, 5000)
	_ = bindTCP(r, a2, 5000)
	r.UnbindTCP("a", 5000)
	if p := r.PortPool(5000); p == nil || p.Len() != 1 {
		t.Fatalf("pool after a unbound: %+v", p)
	}
	r.UnbindTCP("a2", 5000)
	if r.PortBound(5000) {
		t.Fatal("port bound after its last member unbound")
	}
	if err := bindHTTP(r, a, "web"); err != nil {
		t.Fatalf("a, no longer bound, binds another address: %v", err)
	}
}
