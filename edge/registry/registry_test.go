package registry

import (
	"context"
	"errors"
	"net"
	"sync"
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
}

func (s *sess) ID() string             { return s.id }
func (s *sess) KeyID() string          { return s.key }
func (s *sess) RemoteAddr() string     { return "127.0.0.1:1" }
func (s *sess) ConnectedAt() time.Time { return time.Unix(0, 0) }
func (s *sess) OpenForward(context.Context, protocol.ForwardInfo) (net.Conn, error) {
	return nil, errors.New("unused")
}
func (s *sess) Terminate(code, _ string) {
	s.mu.Lock()
	s.terminated = code
	s.mu.Unlock()
	s.reg.Remove(s.id)
}

func TestRoutesAndClaims(t *testing.T) {
	r := New()
	a := &sess{id: "a", key: "k1", reg: r}
	b := &sess{id: "b", key: "k2", reg: r}
	steps := []struct {
		name string
		do   func() error
		want error
	}{
		{"claim k1 for a", func() error { return r.ClaimKey("k1", "a") }, nil},
		{"claim k1 again for a", func() error { return r.ClaimKey("k1", "a") }, nil},
		{"claim k1 for another", func() error { return r.ClaimKey("k1", "x") }, ErrKeyBusy},
		{"add a", func() error { r.Add(a); return nil }, nil},
		{"add b", func() error { r.Add(b); return nil }, nil},
		{"a binds web", func() error { return r.BindHTTP(&Route{Host: "web", URL: "u1", Session: a}) }, nil},
		{"a binds web again", func() error { return r.BindHTTP(&Route{Host: "web", URL: "u1", Session: a}) }, nil},
		{"b binds web", func() error { return r.BindHTTP(&Route{Host: "web", Session: b}) }, ErrAddressTaken},
		{"a binds port", func() error { return r.BindTCP("a", 5000, "tcp://x:5000") }, nil},
		{"b binds port", func() error { return r.BindTCP("b", 5000, "") }, ErrAddressTaken},
	}
	for _, s := range steps {
		if err := s.do(); !errors.Is(err, s.want) {
			t.Fatalf("%s: %v, want %v", s.name, err, s.want)
		}
	}
	before := r.Lookup("web")
	if before == nil || before.Session != a {
		t.Fatal("web not routed to a")
	}
	if in := r.ByKey("k1"); len(in) != 1 || in[0].URL != "u1" {
		t.Fatalf("ByKey = %+v", in)
	}
	if n := r.TerminateKey("k1", protocol.CodeKeyRevoked, "revoked"); n != 1 || a.terminated != protocol.CodeKeyRevoked {
		t.Fatalf("TerminateKey = %d, code %q", n, a.terminated)
	}
	if r.Lookup("web") != nil || r.PortBound(5000) {
		t.Fatal("a's bindings survived its removal")
	}
	if err := r.ClaimKey("k1", "c"); err != nil {
		t.Fatalf("claim after removal: %v", err)
	}
	if err := r.BindHTTP(&Route{Host: "web", Session: b}); err != nil {
		t.Fatalf("b binds freed host: %v", err)
	}
	r.TerminateAll(protocol.CodeEdgeShuttingDown, "bye")
	if r.Count() != 0 || b.terminated != protocol.CodeEdgeShuttingDown {
		t.Fatalf("after TerminateAll: %d sessions, b %q", r.Count(), b.terminated)
	}
}

func TestClaimIsReleasedWithTheSessionInOneStep(t *testing.T) {
	r := New()
	if _, _, held := r.Holder("k"); held {
		t.Fatal("a claim nobody made")
	}
	if err := r.ClaimKey("k", "a"); err != nil {
		t.Fatal(err)
	}
	s, released, held := r.Holder("k")
	if !held || s != nil {
		t.Fatalf("pending claim: held %v, session %v; want held, no session yet", held, s)
	}
	a := &sess{id: "a", key: "k", reg: r}
	r.Add(a)
	if s, _, _ := r.Holder("k"); s != a {
		t.Fatalf("holder after Add = %v", s)
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
	if err := r.ClaimKey("k", "b"); err != nil {
		t.Fatalf("claim right after Remove: %v", err)
	}
	// A failed handshake gives its claim back too.
	_, released, _ = r.Holder("k")
	r.ReleaseClaim("k", "other") // not the holder: no effect
	if _, _, held := r.Holder("k"); !held {
		t.Fatal("ReleaseClaim by a non-holder dropped the claim")
	}
	r.ReleaseClaim("k", "b")
	select {
	case <-released:
	default:
		t.Fatal("ReleaseClaim did not release")
	}
}

func TestTerminatePort(t *testing.T) {
	r := New()
	a := &sess{id: "a", key: "k1", reg: r}
	b := &sess{id: "b", key: "k2", reg: r}
	r.Add(a)
	r.Add(b)
	if err := r.BindTCP("a", 5000, "tcp://x:5000"); err != nil {
		t.Fatal(err)
	}
	r.TerminatePort(5001, protocol.CodeAddressNotFound, "nobody serves it")
	r.TerminatePort(5000, protocol.CodeAddressNotFound, "deleted")
	if a.terminated != protocol.CodeAddressNotFound || b.terminated != "" {
		t.Fatalf("terminated: a %q, b %q; want only a", a.terminated, b.terminated)
	}
	if r.PortBound(5000) || r.Count() != 1 {
		t.Fatalf("after TerminatePort: port bound %v, %d sessions", r.PortBound(5000), r.Count())
	}
}
