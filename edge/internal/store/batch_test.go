package store

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Issuing and renewing many keys at once: more keys than one transaction
// takes, one of them refused (its address belongs to another owner); the
// refusal is that key's alone, the others are stored, indexed and
// renewed, and an unknown id is not_found by itself.
func TestIssueAndRenewManyKeys(t *testing.T) { eachBackend(t, testIssueAndRenewManyKeys) }

func testIssueAndRenewManyKeys(t *testing.T, open opener) {
	s := open(t)
	defer s.Close()
	now := time.Now().UTC().Truncate(time.Second)
	if err := s.CreateDomain(Domain{Name: "taken.tuna.localhost", Ownership: Ownership{Owner: "other/ns"}, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	const n = 2*issueChunk + 7
	var batch []Issue
	for i := range n {
		host := fmt.Sprintf("app-%d.tuna.localhost", i)
		if i == issueChunk+3 {
			host = "taken.tuna.localhost"
		}
		batch = append(batch, Issue{Claimable: true, Key: TunnelKey{ID: fmt.Sprintf("tk_%03d", i), Protocol: "http",
			Address: host, Owner: "c1/ns", CreatedAt: now, ExpiresAt: now.Add(time.Hour), TTL: time.Hour}})
	}
	errs := s.IssueTunnelKeys(batch)
	for i, err := range errs {
		if i == issueChunk+3 {
			if oe, ok := errors.AsType[*OwnedError](err); !ok || oe.Owner != "other/ns" {
				t.Fatalf("key %d on another owner's domain: %v, want an OwnedError naming other/ns", i, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
	}
	keys, err := s.ListTunnelKeys()
	if err != nil || len(keys) != n-1 {
		t.Fatalf("%d keys stored (%v), want %d", len(keys), err, n-1)
	}
	if h := s.Host("app-0.tuna.localhost"); h.Keys != 1 {
		t.Fatalf("host index after the batch: %+v", h)
	}
	if h := s.Host("taken.tuna.localhost"); h.Keys != 0 {
		t.Fatalf("the refused key is in the host index: %+v", h)
	}
	claims, err := s.ListClaims()
	if err != nil || len(claims) != n-1 {
		t.Fatalf("%d claims (%v), want one per issued key", len(claims), err)
	}

	ids := []string{"tk_000", "tk_missing", fmt.Sprintf("tk_%03d", n-1)}
	for i := range issueChunk {
		ids = append(ids, fmt.Sprintf("tk_%03d", i+1))
	}
	later := now.Add(30 * time.Minute)
	refuse := errors.New("refused by update")
	out, errs := s.UpdateTunnelKeys(ids, func(k *TunnelKey) error {
		if k.ID == "tk_002" {
			return refuse
		}
		k.ExpiresAt = later.Add(k.TTL)
		return nil
	})
	for i, id := range ids {
		switch {
		case id == "tk_missing":
			if !errors.Is(errs[i], ErrNotFound) {
				t.Fatalf("unknown id: %v, want ErrNotFound", errs[i])
			}
		case id == "tk_002":
			if !errors.Is(errs[i], refuse) {
				t.Fatalf("refused key: %v", errs[i])
			}
		case errs[i] != nil || !out[i].ExpiresAt.Equal(later.Add(time.Hour)):
			t.Fatalf("%s renewed: %+v %v", id, out[i], errs[i])
		}
	}
	for id, want := range map[string]time.Time{"tk_000": later.Add(time.Hour), "tk_002": now.Add(time.Hour)} {
		k, err := s.GetTunnelKey(id)
		if err != nil || !k.ExpiresAt.Equal(want) {
			t.Fatalf("%s read back: expires %v (%v), want %v", id, k.ExpiresAt, err, want)
		}
	}
}
