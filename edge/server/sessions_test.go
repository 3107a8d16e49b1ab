package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

// GET /v1/sessions: the live sessions of a cluster's keys, then, from the
// cursor of that answer, only the sessions that began and ended since,
// in order; never those of keys the caller may not list (another owner's,
// whatever the labels it asks for) or whose labels do not match. A cursor
// from another run of the edge gets every live session again; one that is
// not a cursor is refused with what to send.
func TestSessionChangesFollowTheSessions(t *testing.T) {
	e := startEdge(t, t.TempDir())
	ctx := context.Background()
	admin := e.client(e.fullKey)
	bound, err := admin.CreateAPIKey(ctx, apiwire.CreateAPIKey{Scopes: []string{apiwire.ScopeWrite}, OwnerPrefix: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	c1 := e.client(bound.Key)
	keyOf := func(name, cluster string) *apiwire.TunnelKey {
		return e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: name, Owner: cluster + "/ns",
			Labels: map[string]string{"cluster": cluster}})
	}
	k1, k2, other := keyOf("one", "c1"), keyOf("two", "c1"), keyOf("three", "c2")
	session := func(k *apiwire.TunnelKey) string {
		s := e.mustDial(t, k.Key)
		return bind(t, s, protocol.BindRequest{Protocol: "http"}).SessionID
	}
	s1 := e.mustDial(t, k1.Key)
	s1ID := bind(t, s1, protocol.BindRequest{Protocol: "http"}).SessionID
	session(other)

	mine := map[string]string{"cluster": "c1"}
	first, err := c1.SessionChanges(ctx, mine, "")
	if err != nil {
		t.Fatal(err)
	}
	if !first.Full || first.Cursor == "" || fmt.Sprint(first.Items) != fmt.Sprint([]apiwire.SessionChange{{KeyID: k1.ID, ID: s1ID}}) {
		t.Fatalf("the first answer: %+v, want in full the one session of c1", first)
	}

	s2ID := session(k2)
	_ = s1.Close()
	waitFor(t, "the closed session to end", func() bool { return len(e.ActiveSessions()) == 2 })
	session(other)
	next, err := c1.SessionChanges(ctx, mine, first.Cursor)
	if err != nil {
		t.Fatal(err)
	}
	want := []apiwire.SessionChange{{KeyID: k2.ID, ID: s2ID}, {KeyID: k1.ID, ID: s1ID, Ended: true}}
	if next.Full || next.Cursor == first.Cursor || fmt.Sprint(next.Items) != fmt.Sprint(want) {
		t.Fatalf("since the first answer: %+v, want the changes %v", next, want)
	}
	if same, err := c1.SessionChanges(ctx, mine, next.Cursor); err != nil || same.Full || len(same.Items) != 0 || same.Cursor != next.Cursor {
		t.Fatalf("nothing changed since: %+v %v", same, err)
	}

	// Another owner's sessions, whatever the labels asked for.
	for _, since := range []string{"", first.Cursor} {
		theirs, err := c1.SessionChanges(ctx, map[string]string{"cluster": "c2"}, since)
		if err != nil || len(theirs.Items) != 0 {
			t.Fatalf("c2's sessions to c1's key (since %q): %+v %v", since, theirs, err)
		}
	}
	all, err := e.client(e.writeKey).SessionChanges(ctx, map[string]string{"cluster": "c2"}, "")
	if err != nil || len(all.Items) != 2 {
		t.Fatalf("c2's sessions to a key of every owner: %+v %v", all, err)
	}
	// A session of an API key (tunnels:connect) is no tunnel key's: never
	// listed, even with no filter.
	connectKey, err := e.CreateAPIKey("user", []string{apiwire.ScopeConnect})
	if err != nil {
		t.Fatal(err)
	}
	bind(t, e.mustDial(t, connectKey), protocol.BindRequest{Protocol: "http", Subdomain: "user"})
	every, err := e.client(e.writeKey).SessionChanges(ctx, nil, "")
	if err != nil || len(every.Items) != 3 {
		t.Fatalf("every session to a key of every owner: %+v %v, want the 3 of tunnel keys", every, err)
	}
	for _, it := range every.Items {
		if it.KeyID != k2.ID && it.KeyID != other.ID {
			t.Fatalf("listed a session of key %s, no tunnel key of the test", it.KeyID)
		}
	}

	again, err := c1.SessionChanges(ctx, mine, "0123456789abcdef.1")
	if err != nil || !again.Full || fmt.Sprint(again.Items) != fmt.Sprint([]apiwire.SessionChange{{KeyID: k2.ID, ID: s2ID}}) {
		t.Fatalf("a cursor of another run: %+v %v, want every live session", again, err)
	}
	for _, bad := range []string{"x", "run.", "run.-1", ".4"} {
		_, err := c1.SessionChanges(ctx, mine, bad)
		if ae, ok := errors.AsType[*apiwire.APIError](err); !ok || ae.Status != http.StatusBadRequest || ae.Code != apiwire.CodeInvalidRequest {
			t.Errorf("since=%q: %v, want 400 invalid_request", bad, err)
		}
	}
}
