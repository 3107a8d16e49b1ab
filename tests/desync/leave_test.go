package desync

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// A client that leaves ends its exchange at both hops: the backend's
// request is cancelled (as with net/http in front of it), and no slot,
// channel or connection is left. Before, the edge and the agent held all
// of them until the backend answered, which a long poll may never do.
func TestAClientThatLeavesCancelsTheBackend(t *testing.T) {
	started, ended := make(chan string, 4), make(chan string, 4)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- r.URL.Path
		if _, err := io.Copy(io.Discard, r.Body); err == nil {
			<-r.Context().Done() // a long poll: answers only when it has news
		}
		ended <- r.URL.Path
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	await := func(ch <-chan string, what string) string {
		t.Helper()
		select {
		case v := <-ch:
			return v
		case <-time.After(15 * time.Second):
			t.Fatal(what)
			return ""
		}
	}
	for _, v := range []struct {
		name string
		o    options
	}{
		{"relay", options{upstream: ln.Addr().String()}},
		{"net-http", options{upstream: ln.Addr().String(), netHTTP: true}},
		{"relay over TLS", options{upstream: ln.Addr().String(), https: true}},
	} {
		t.Run(v.name, func(t *testing.T) {
			s := startStack(t, v.o)
			fds := openFiles(t)
			for _, tc := range []struct{ path, raw string }{
				{"/long-poll", "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n"},
				{"/upload", "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 100000\r\n\r\npartial"},
			} {
				c, err := s.dial()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := fmt.Fprintf(c, tc.raw, tc.path, host); err != nil {
					t.Fatal(err)
				}
				if got := await(started, tc.path+": the backend never got the request"); got != tc.path {
					t.Fatalf("the backend started %s", got)
				}
				_ = c.Close()
				if got := await(ended, tc.path+": the backend still works for a client that left"); got != tc.path {
					t.Fatalf("the backend ended %s", got)
				}
			}
			deadline := time.Now().Add(15 * time.Second)
			for !s.settled(t, fds) {
				if time.Now().After(deadline) {
					t.Fatalf("left behind by clients that left: %s", s.leftBehind(t, fds))
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
