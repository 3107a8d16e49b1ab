package reservation

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// The ledger releases the reservation of a resource that went without its
// finalizer exactly when the finalizer would have, and only once.
func TestLedgerGone(t *testing.T) {
	key := types.NamespacedName{Namespace: "team", Name: "web"}
	cases := []struct {
		name        string
		held        *Held
		inUse       bool
		releaseErr  error
		wantRelease bool
		wantErr     bool
		wantKept    bool
	}{
		{name: "nothing held: nothing released"},
		{name: "made here, reclaimPolicy Delete: released", held: &Held{UID: "u1", Address: "web.example.test", Release: true}, wantRelease: true},
		{name: "adopted or retained: kept on the edge", held: &Held{UID: "u1", Address: "web.example.test"}},
		{name: "a live resource holds or asks for the address: kept", held: &Held{UID: "u1", Address: "web.example.test", Release: true}, inUse: true},
		{name: "already gone on the edge: released", held: &Held{UID: "u1", Address: "web.example.test", Release: true},
			releaseErr: &apiwire.APIError{Status: http.StatusNotFound, Code: "not_found"}, wantRelease: true},
		{name: "the edge fails: the entry stays for the retry", held: &Held{UID: "u1", Address: "web.example.test", Release: true},
			releaseErr: errors.New("503"), wantRelease: true, wantErr: true, wantKept: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var l Ledger
			if c.held != nil {
				l.Hold(key, *c.held)
			}
			released := ""
			err := l.Gone(context.Background(), key, "Domain",
				func(context.Context, Held) (bool, error) { return c.inUse, nil },
				func(_ context.Context, addr string) error { released = addr; return c.releaseErr })
			if (err != nil) != c.wantErr {
				t.Fatalf("error = %v, want one: %v", err, c.wantErr)
			}
			if (released != "") != c.wantRelease {
				t.Errorf("released %q, want a release: %v", released, c.wantRelease)
			}
			if c.held != nil {
				if _, kept := l.Lookup(key, c.held.UID); kept != c.wantKept {
					t.Errorf("entry kept = %v, want %v", kept, c.wantKept)
				}
			}
		})
	}
}

// Lookup answers only for the UID that holds: a resource re-created under
// the same name is another resource.
func TestLedgerLookupByUID(t *testing.T) {
	key := types.NamespacedName{Namespace: "team", Name: "web"}
	var l Ledger
	l.Hold(key, Held{UID: "old", Address: "a", Release: true})
	if _, ok := l.Lookup(key, "new"); ok {
		t.Error("the entry of UID old answered for UID new")
	}
	if h, ok := l.Lookup(key, "old"); !ok || h.Address != "a" {
		t.Errorf("Lookup(old) = %+v, %v", h, ok)
	}
	l.Forget(key)
	if _, ok := l.Lookup(key, "old"); ok {
		t.Error("Forget left the entry")
	}
}
