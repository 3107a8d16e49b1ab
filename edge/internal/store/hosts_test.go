package store

import (
	"errors"
	"testing"
)

// TestHostIndex walks one store through the writes that change what it
// serves and checks the index after each step, then reopens the file to
// check that the index built at start agrees.
func TestHostIndex(t *testing.T) { eachBackend(t, testHostIndex) }

func testHostIndex(t *testing.T, open opener) {
	s := open(t)
	const (
		app    = "app.tuna.example"
		shared = "shared.tuna.example"
		custom = "www.example.org"
		sub    = "reserved.tuna.example"
		// written through the ownership paths the edge API uses
		claimed = "claimed.tuna.example"
		custom2 = "api.example.org"
	)
	type want map[string]Host
	steps := []struct {
		name    string
		do      func() error
		wantErr error
		want    want
	}{
		{"empty store", func() error { return nil }, nil, want{app: {}, custom: {}}},
		{"http key for a host", func() error {
			return s.CreateTunnelKey(TunnelKey{ID: "k1", Protocol: "http", Address: app})
		}, nil, want{app: {Keys: 1}}},
		{"http key for any host names none", func() error {
			return s.CreateTunnelKey(TunnelKey{ID: "k2", Protocol: "http"})
		}, nil, want{"": {}, app: {Keys: 1}}},
		{"tcp key's alias is not a host", func() error {
			return s.CreateTunnelKey(TunnelKey{ID: "k3", Protocol: "tcp", Address: shared})
		}, nil, want{shared: {}}},
		{"two keys share a host", func() error {
			if err := s.CreateTunnelKey(TunnelKey{ID: "k4", Protocol: "http", Address: shared}); err != nil {
				return err
			}
			return s.CreateTunnelKey(TunnelKey{ID: "k5", Protocol: "http", Address: shared})
		}, nil, want{shared: {Keys: 2}}},
		{"duplicate key id leaves the index alone", func() error {
			return s.CreateTunnelKey(TunnelKey{ID: "k1", Protocol: "http", Address: "other.tuna.example"})
		}, ErrExists, want{"other.tuna.example": {}, app: {Keys: 1}}},
		{"deleting one of two keys keeps the host", func() error { return s.DeleteTunnelKey("k4") },
			nil, want{shared: {Keys: 1}}},
		{"deleting a missing key changes nothing", func() error { return s.DeleteTunnelKey("k4") },
			ErrNotFound, want{shared: {Keys: 1}}},
		{"deleting the last key forgets the host", func() error { return s.DeleteTunnelKey("k5") },
			nil, want{shared: {}}},
		{"reserved subdomain", func() error { return s.CreateDomain(Domain{Name: sub, Subdomain: "reserved"}) },
			nil, want{sub: {Reserved: true}}},
		{"custom domain, unverified", func() error { return s.CreateDomain(Domain{Name: custom, Custom: true}) },
			nil, want{custom: {Reserved: true, Custom: true}}},
		{"taken domain leaves the index alone", func() error { return s.CreateDomain(Domain{Name: custom, Custom: true, Verified: true}) },
			ErrExists, want{custom: {Reserved: true, Custom: true}}},
		{"key for the custom domain", func() error {
			return s.CreateTunnelKey(TunnelKey{ID: "k6", Protocol: "http", Address: custom})
		}, nil, want{custom: {Keys: 1, Reserved: true, Custom: true}}},
		{"custom domain verified", func() error { return s.UpdateDomain(Domain{Name: custom, Custom: true, Verified: true}) },
			nil, want{custom: {Keys: 1, Reserved: true, Custom: true, Verified: true}}},
		{"updating a missing domain changes nothing", func() error {
			return s.UpdateDomain(Domain{Name: "gone.example.org", Custom: true, Verified: true})
		}, ErrNotFound, want{"gone.example.org": {}}},
		{"issued key claims and names its host", func() error {
			return s.IssueTunnelKey(TunnelKey{ID: "k7", Protocol: "http", Address: claimed, Owner: "c/a"}, true)
		}, nil, want{claimed: {Keys: 1}}},
		{"revoked key forgets its host", func() error { _, err := s.RevokeTunnelKey("k7"); return err },
			nil, want{claimed: {}}},
		{"custom domain for ChangeDomain", func() error { return s.CreateDomain(Domain{Name: custom2, Custom: true}) },
			nil, want{custom2: {Reserved: true, Custom: true}}},
		{"verified through ChangeDomain", func() error {
			_, err := s.ChangeDomain(custom2, func(d *Domain) error { d.Verified = true; return nil })
			return err
		}, nil, want{custom2: {Reserved: true, Custom: true, Verified: true}}},
		{"domain released, its key remains", func() error { return s.DeleteDomain(custom, nil) },
			nil, want{custom: {Keys: 1}, sub: {Reserved: true}}},
	}
	var last want
	for _, st := range steps {
		if err := st.do(); !errors.Is(err, st.wantErr) {
			t.Fatalf("%s: err = %v, want %v", st.name, err, st.wantErr)
		}
		for host, w := range st.want {
			if got := s.Host(host); got != w {
				t.Errorf("%s: Host(%q) = %+v, want %+v", st.name, host, got, w)
			}
		}
		last = st.want
	}

	// The index built at start must match the one kept up to date.
	all := []string{app, shared, custom, sub, claimed, custom2, "other.tuna.example", ""}
	before := map[string]Host{}
	for _, h := range all {
		before[h] = s.Host(h)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t)
	defer s.Close()
	for _, h := range all {
		if got := s.Host(h); got != before[h] {
			t.Errorf("after reopen: Host(%q) = %+v, want %+v", h, got, before[h])
		}
	}
	for host, w := range last {
		if got := s.Host(host); got != w {
			t.Errorf("after reopen: Host(%q) = %+v, want %+v", host, got, w)
		}
	}
}

func TestHostKnown(t *testing.T) {
	for _, tc := range []struct {
		h    Host
		want bool
	}{
		{Host{}, false},
		{Host{Keys: 1}, true},
		{Host{Reserved: true, Custom: true}, true},
		{Host{Reserved: true}, true},
	} {
		if got := tc.h.Known(); got != tc.want {
			t.Errorf("%+v.Known() = %v, want %v", tc.h, got, tc.want)
		}
	}
}

// TestHostIndexConcurrentWrites races key writes for one host: the index
// must end where the database ends.
func TestHostIndexConcurrentWrites(t *testing.T) { eachBackend(t, testHostIndexConcurrentWrites) }

func testHostIndexConcurrentWrites(t *testing.T, open opener) {
	s := open(t)
	defer s.Close()
	const host, n = "busy.tuna.example", 20
	errs := make(chan error, 2*n)
	for i := range n {
		go func() {
			id := "c" + string(rune('a'+i))
			if err := s.CreateTunnelKey(TunnelKey{ID: id, Protocol: "http", Address: host}); err != nil {
				errs <- err
				return
			}
			if i%2 == 0 {
				errs <- s.DeleteTunnelKey(id)
				return
			}
			errs <- nil
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	keys, err := s.ListTunnelKeys()
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Host(host).Keys; got != len(keys) || got != n/2 {
		t.Fatalf("Host(%q).Keys = %d, database holds %d keys, want %d", host, got, len(keys), n/2)
	}
}
