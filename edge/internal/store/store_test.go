package store

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestRecordsRoundTripAndPersist(t *testing.T) { eachBackend(t, testRecordsRoundTripAndPersist) }

func testRecordsRoundTripAndPersist(t *testing.T, open opener) {
	s := open(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	steps := []struct {
		name string
		do   func() error
		want error
	}{
		{"api key", func() error {
			return s.CreateAPIKey(APIKey{ID: "a1", Scopes: []string{"full"}, Hash: []byte{1}, CreatedAt: now})
		}, nil},
		{"api key twice", func() error { return s.CreateAPIKey(APIKey{ID: "a1"}) }, ErrExists},
		{"tunnel key", func() error {
			return s.CreateTunnelKey(TunnelKey{ID: "t1", Protocol: "http", Labels: map[string]string{"a": "b"}, Hash: []byte{2}})
		}, nil},
		{"domain", func() error { return s.CreateDomain(Domain{Name: "x.example.com", Custom: true, Token: "tok"}) }, nil},
		{"domain twice", func() error { return s.CreateDomain(Domain{Name: "x.example.com"}) }, ErrExists},
		{"update missing domain", func() error { return s.UpdateDomain(Domain{Name: "nope.example.com"}) }, ErrNotFound},
		{"verify domain", func() error {
			return s.UpdateDomain(Domain{Name: "x.example.com", Custom: true, Token: "tok", Verified: true})
		}, nil},
		{"delete missing key", func() error { return s.DeleteAPIKey("zz") }, ErrNotFound},
	}
	for _, st := range steps {
		if err := st.do(); !errors.Is(err, st.want) {
			t.Fatalf("%s: err %v, want %v", st.name, err, st.want)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t)
	defer s.Close()
	k, err := s.GetAPIKey("a1")
	if err != nil || !k.CreatedAt.Equal(now) || !bytes.Equal(k.Hash, []byte{1}) {
		t.Fatalf("api key after reopen: %+v %v", k, err)
	}
	tk, err := s.GetTunnelKey("t1")
	if err != nil || tk.Labels["a"] != "b" {
		t.Fatalf("tunnel key after reopen: %+v %v", tk, err)
	}
	d, err := s.GetDomain("x.example.com")
	if err != nil || !d.Verified || d.Token != "tok" {
		t.Fatalf("domain after reopen: %+v %v", d, err)
	}
	if err := s.DeleteTunnelKey("t1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetTunnelKey("t1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted tunnel key: %v", err)
	}
}

var errNoPort = errors.New("no port left")

// lowestFree is the simplest PortPicker: the lowest port of first..last
// that is not taken.
func lowestFree(first, last int) PortPicker {
	return func(taken map[int]bool) (int, error) {
		for p := first; p <= last; p++ {
			if !taken[p] {
				return p, nil
			}
		}
		return 0, errNoPort
	}
}

func TestTCPPortAllocation(t *testing.T) { eachBackend(t, testTCPPortAllocation) }

func testTCPPortAllocation(t *testing.T, open opener) {
	s := open(t)
	defer s.Close()
	cases := []struct {
		op, alias string
		wantPort  int
		wantErr   error
	}{
		{"create", "a", 100, nil},
		{"create", "b", 101, nil},
		{"create", "c", 102, nil},
		{"create", "d", 0, errNoPort}, // the picker's error is passed on
		{"create", "a", 0, ErrExists},
		{"delete", "b", 0, nil},
		{"create", "d", 101, nil}, // the lowest free port is reused
		{"delete", "zz", 0, ErrNotFound},
	}
	for _, c := range cases {
		switch c.op {
		case "create":
			e, err := s.CreateTCPEndpoint(TCPEndpoint{Alias: c.alias, CreatedAt: time.Now()}, lowestFree(100, 102))
			if !errors.Is(err, c.wantErr) || e.Port != c.wantPort {
				t.Fatalf("create %s: %+v %v, want port %d err %v", c.alias, e, err, c.wantPort, c.wantErr)
			}
		case "delete":
			if _, err := s.DeleteTCPEndpoint(c.alias, nil); !errors.Is(err, c.wantErr) {
				t.Fatalf("delete %s: %v", c.alias, err)
			}
		}
	}
	if e, err := s.TCPEndpointByPort(101); err != nil || e.Alias != "d" {
		t.Fatalf("by port: %+v %v", e, err)
	}
}

func TestConcurrentAllocationNeverSharesAPort(t *testing.T) {
	eachBackend(t, testConcurrentAllocationNeverSharesAPort)
}

func testConcurrentAllocationNeverSharesAPort(t *testing.T, open opener) {
	s := open(t)
	defer s.Close()
	var wg sync.WaitGroup
	ports := make(chan int, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if e, err := s.CreateTCPEndpoint(TCPEndpoint{Alias: string(rune('a' + i))}, lowestFree(1000, 1009)); err == nil {
				ports <- e.Port
			}
		}()
	}
	wg.Wait()
	close(ports)
	seen := map[int]bool{}
	for p := range ports {
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	if len(seen) != 10 {
		t.Fatalf("%d ports allocated, want 10", len(seen))
	}
}

// TestLegacyHostKeyDroppedByCompaction: only bbolt files of old edges hold
// a host key; dropping it compacts the file and keeps the records.
func TestLegacyHostKeyDroppedByCompaction(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateDomain(Domain{Name: "x.example.com"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLegacyHostKey([]byte("PEM")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if hk, err := s.LegacyHostKey(); err != nil || string(hk) != "PEM" {
		t.Fatalf("legacy host key after reopen: %q %v", hk, err)
	}
	if err := s.DropLegacyHostKey(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LegacyHostKey(); !errors.Is(err, ErrNotFound) {
		t.Fatalf("legacy host key after drop: %v", err)
	}
	if _, err := s.GetDomain("x.example.com"); err != nil {
		t.Fatalf("domain after compaction: %v", err)
	}
}
