package httpfwd

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// Trailers the client declared reach the upstream with the values sent
// after the body; those the rulebook refuses do not.
func TestRequestTrailersReachTheUpstream(t *testing.T) {
	seen := make(chan http.Header, 1)
	be := startBackend(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		seen <- r.Trailer
	}, nil)
	front := startFront(t, be.addr)
	body, send := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, "http://"+front+"/", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Trailer = http.Header{"X-Sum": nil, "X-Forwarded-For": nil}
	go func() {
		_, _ = io.WriteString(send, "some body")
		req.Trailer.Set("X-Sum", "42")
		req.Trailer.Set("X-Forwarded-For", "203.0.113.9")
		_ = send.Close()
	}()
	resp, err := oneConnClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	got := <-seen
	if got.Get("X-Sum") != "42" || got.Get("X-Forwarded-For") != "" {
		t.Fatalf("the upstream got trailers %v, want X-Sum 42 and no X-Forwarded-For", got)
	}
}

// The head of a streamed answer reaches the client before any of its
// body exists: the backend writes the rest only once the client has the
// head, so a forwarder that held the head back would wait for ever (and
// the client's timeout fail the test).
func TestStreamedHeadGoesOutAtOnce(t *testing.T) {
	gotHead := make(chan struct{})
	be := startBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-gotHead:
			_, _ = io.WriteString(w, "then the body")
		case <-r.Context().Done():
		}
	}, nil)
	front := startFront(t, be.addr)
	resp, err := oneConnClient(t).Get("http://" + front + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	close(gotHead)
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusAccepted || !strings.EqualFold(string(b), "then the body") {
		t.Fatalf("%d %q %v", resp.StatusCode, b, err)
	}
}
