package store

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// A page of the key list reads from its place in the id order: scan
// starts after the given id, in order, and stops when told, across more
// keys than one range read of etcd fetches.
func TestScanTunnelKeys(t *testing.T) { eachBackend(t, testScanTunnelKeys) }

func testScanTunnelKeys(t *testing.T, open opener) {
	s := open(t)
	defer s.Close()
	now := time.Now().UTC().Truncate(time.Second)
	const n = 2*scanChunk + 50
	var batch []Issue
	var ids []string
	for i := range n {
		id := fmt.Sprintf("tk_%04d", i)
		ids = append(ids, id)
		batch = append(batch, Issue{Claimable: true, Key: TunnelKey{ID: id, Protocol: "http",
			Address: fmt.Sprintf("app-%d.tuna.localhost", i), Owner: "c1/ns", CreatedAt: now}})
	}
	for i, err := range s.IssueTunnelKeys(batch) {
		if err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
	}
	// take scans after after and stops once it has seen want keys.
	take := func(after string, want int) []string {
		t.Helper()
		var got []string
		calls := 0
		err := s.ScanTunnelKeys(after, func(k TunnelKey) bool {
			calls++
			got = append(got, k.ID)
			return len(got) < want
		})
		if err != nil {
			t.Fatal(err)
		}
		if calls != len(got) {
			t.Fatalf("fn called %d times for %d keys", calls, len(got))
		}
		return got
	}
	for _, c := range []struct {
		name  string
		after string
		want  int
		ids   []string
	}{
		{"from the start", "", 10, ids[:10]},
		{"after an id", ids[300], 5, ids[301:306]},
		{"across range reads", ids[scanChunk-3], scanChunk + 10, ids[scanChunk-2 : 2*scanChunk+8]},
		{"after an id that is not stored", ids[99] + "x", 3, ids[100:103]},
		{"to the end", ids[n-10], 1000, ids[n-9:]},
		{"after the last", ids[n-1], 1000, nil},
	} {
		if got := take(c.after, c.want); !slices.Equal(got, c.ids) {
			t.Errorf("%s: scanned %d keys %v..., want %d from %v", c.name, len(got), head(got), len(c.ids), head(c.ids))
		}
	}
}

func head(ids []string) []string { return ids[:min(3, len(ids))] }
