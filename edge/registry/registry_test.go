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
