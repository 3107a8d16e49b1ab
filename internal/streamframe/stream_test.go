package streamframe

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// pair runs Serve with h on one end of a pipe and returns the edge's end.
func pair(t *testing.T, h http.Handler) *Conn {
	t.Helper()
	edge, agent := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		Serve(context.Background(), agent, h, nil)
	}()
	t.Cleanup(func() {
		_ = edge.Close()
		<-done
	})
	return NewConn(edge)
}

// One channel carries exchanges one after the other: the request's
// method, authority, path, fields, body and declared trailers reach the
// handler; its status, fields, body and trailers (declared and not) come
// back; fields the rulebook keeps to one hop stay behind.
func TestExchangesOnOneChannel(t *testing.T) {
	c := pair(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Trailer", "X-Echoed")
		w.Header().Set("Connection", "close")
		w.Header().Set("X-Got", strings.Join([]string{r.Method, r.Host, r.RequestURI, r.Proto, r.Header.Get("X-A"), r.Trailer.Get("X-Sum"), string(body)}, " "))
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "answer")
		w.Header().Set("X-Echoed", "yes")
		w.Header().Set(http.TrailerPrefix+"X-Late", "late")
	}))
	for i := range 3 {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://app.tuna.localhost/p?q=1", strings.NewReader("hello"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-A", "1")
		req.Trailer = http.Header{"X-Sum": {"5"}}
		rec := httptest.NewRecorder()
		reusable, err := Forward(rec, req, c)
		if err != nil || !reusable {
			t.Fatalf("exchange %d: reusable %v, %v", i, reusable, err)
		}
		res := rec.Result()
		body, _ := io.ReadAll(res.Body)
		if want := "POST app.tuna.localhost /p?q=1 HTTP/2.0 1 5 hello"; res.StatusCode != http.StatusCreated || res.Header.Get("X-Got") != want || string(body) != "answer" {
			t.Fatalf("exchange %d: %d %q %q, want 201 %q answer", i, res.StatusCode, res.Header.Get("X-Got"), body, want)
		}
		if res.Header.Get("Connection") != "" {
			t.Fatalf("a hop-by-hop field crossed: %v", res.Header)
		}
		if res.Trailer.Get("X-Echoed") != "yes" || res.Trailer.Get("X-Late") != "late" {
			t.Fatalf("trailers %v", res.Trailer)
		}
	}
}

// A stream the client resets (its context ends) closes the channel: the
// handler's request ends, and the channel is not kept.
func TestResetEndsTheHandlersRequest(t *testing.T) {
	ended := make(chan error, 1)
	started := make(chan struct{})
	c := pair(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		ended <- r.Context().Err()
	}))
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://app/wait", nil)
	if err != nil {
		t.Fatal(err)
	}
	result := make(chan error, 1)
	go func() {
		_, err := Forward(httptest.NewRecorder(), req, c)
		result <- err
	}()
	<-started
	cancel()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the handler's request ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler's request did not end with the stream")
	}
	if err := <-result; err == nil {
		t.Fatal("a reset stream's exchange reported no error")
	}
}
