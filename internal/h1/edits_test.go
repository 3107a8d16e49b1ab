package h1

import (
	"net"
	"net/http"
	"testing"
	"time"
)

// editingRouter is testRouter with edits of the answer, as an access
// policy's response header rules make them.
type editingRouter struct{ *testRouter }

func (r editingRouter) Route(h *Head, remote string) (Route, bool) {
	rt, ok := r.testRouter.Route(h, remote)
	rt.ResponseSet = []Field{{Name: []byte("X-Frame-Options"), Value: []byte("DENY")}}
	rt.ResponseDrop = []string{"server", "x-frame-options"}
	return rt, ok
}

// A route's edits of the answer apply to the final answer only: the
// fields it drops are gone, its own are added.
func TestRelayEditsTheAnswer(t *testing.T) {
	upstream, _ := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "secret-version")
		w.Header().Set("X-Frame-Options", "ALLOWALL")
		w.Header().Set("X-Kept", "1")
		_, _ = w.Write([]byte("ok"))
	}))
	rt := &testRouter{addr: upstream}
	s := &Server{Router: editingRouter{rt}, Fallback: &http.Server{}, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	rc := dialRaw(t, ln.Addr().String())
	res, body := rc.do(t, "GET", get("relay.test", "/"))
	if res.StatusCode != 200 || body != "ok" {
		t.Fatalf("answer %d %q", res.StatusCode, body)
	}
	if got := res.Header.Values("X-Frame-Options"); len(got) != 1 || got[0] != "DENY" {
		t.Errorf("X-Frame-Options = %q, want the route's DENY alone", got)
	}
	if res.Header.Get("Server") != "" || res.Header.Get("X-Kept") != "1" {
		t.Errorf("answer's fields: %v", res.Header)
	}
}
