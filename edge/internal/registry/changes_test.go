package registry

import (
	"fmt"
	"testing"
)

// keyed is a session whose key has an owner and labels.
type keyed struct {
	sess
	owner  string
	labels map[string]string
}

func (k *keyed) TunnelKey() (string, map[string]string, bool) { return k.owner, k.labels, true }

// A reader that follows the changes hears each session that began and
// ended after its last look, in order, with its key's owner and labels;
// one whose last look is older than the changes kept, or from another
// registry, is told to read the live sessions instead, and those are
// every live session as of the number they come with.
func TestSessionChanges(t *testing.T) {
	r := New()
	r.KeepChanges(4)
	a := &keyed{sess: sess{id: "a", key: "k1", reg: r}, owner: "c1/ns", labels: map[string]string{"cluster": "c1"}}
	b := &sess{id: "b", key: "k2", reg: r}
	start, last, ok := r.ChangesSince(0)
	if !ok || len(start) != 0 || last != 0 {
		t.Fatalf("an empty registry: %v %d %v", start, last, ok)
	}
	r.Add(a, true)
	r.Add(b, false)
	r.Remove("a")
	r.Remove("a") // gone already: no change
	got, last, ok := r.ChangesSince(0)
	want := []SessionChange{
		{Seq: 1, KeyID: "k1", SessionID: "a", Tunnel: true, Owner: "c1/ns", Labels: a.labels},
		{Seq: 2, KeyID: "k2", SessionID: "b"},
		{Seq: 3, KeyID: "k1", SessionID: "a", Ended: true, Tunnel: true, Owner: "c1/ns", Labels: a.labels},
	}
	if !ok || last != 3 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("changes since 0: %v (last %d, %v), want %v", got, last, ok, want)
	}
	if got, last, ok := r.ChangesSince(2); !ok || last != 3 || len(got) != 1 || got[0].Seq != 3 {
		t.Fatalf("changes since 2: %v %d %v", got, last, ok)
	}
	if got, _, ok := r.ChangesSince(3); !ok || len(got) != 0 {
		t.Fatalf("changes since the last: %v %v", got, ok)
	}
	if _, _, ok := r.ChangesSince(4); ok {
		t.Fatal("a number past the last (another registry's) is taken for one of this")
	}
	for i := range 10 {
		r.Add(&sess{id: fmt.Sprint("s", i), key: "k3", reg: r}, false)
	}
	// 13 changes, at least the last 4 kept and at most 8.
	if _, _, ok := r.ChangesSince(2); ok {
		t.Fatal("changes since a number older than those kept are answered")
	}
	if got, last, ok := r.ChangesSince(9); !ok || last != 13 || len(got) != 4 || got[0].Seq != 10 {
		t.Fatalf("changes since 9, within those kept: %v %d %v", got, last, ok)
	}
	live, last := r.LiveSessions()
	if last != 13 || len(live) != 11 {
		t.Fatalf("live sessions: %d as of %d, want 11 as of 13", len(live), last)
	}
	for _, c := range live {
		if c.Ended || c.SessionID == "a" {
			t.Fatalf("a live session listed as %+v", c)
		}
	}
	if New().Run() == r.Run() {
		t.Fatal("two registries have the same run")
	}
}
