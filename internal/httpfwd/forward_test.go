package httpfwd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// backend is a real HTTP server on loopback that counts the connections
// it accepts.
type backend struct {
	addr  string
	conns atomic.Int64
}

func startBackend(t *testing.T, h http.HandlerFunc, state func(net.Conn, http.ConnState)) *backend {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{addr: l.Addr().String()}
	srv := &http.Server{Handler: h, ConnState: func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			b.conns.Add(1)
		}
		if state != nil {
			state(c, st)
		}
	}}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return b
}

// startFront is a real HTTP server that forwards every request with
// Forward, keeping the idle connections of each inbound connection; the
// X-To header, when set, names the backend (and the key), else to.
func startFront(t *testing.T, to string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			addr := to
			if v := r.Header.Get("X-To"); v != "" {
				addr = v
			}
			dial := func(ctx context.Context) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", addr)
			}
			idle, ok := IdleOf(r.Context())
			if !ok {
				t.Error("Pin set no Idle in the request's context")
				http.Error(w, "front: no idle set", http.StatusInternalServerError)
				return
			}
			if err := Forward(w, Outgoing(r), idle, addr, dial, nil); err != nil {
				http.Error(w, "front: "+err.Error(), http.StatusBadGateway)
			}
		}),
	}
	Pin(srv)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// oneConnClient sends every request on one keep-alive connection.
func oneConnClient(t *testing.T) *http.Client {
	tr := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, ExpectContinueTimeout: time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// reply is what a client got.
type reply struct {
	code            int
	header, trailer http.Header
	body            string
}

func get(t *testing.T, c *http.Client, url string, hdr http.Header) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s body: %v", url, err)
	}
	return reply{code: resp.StatusCode, header: resp.Header, trailer: resp.Trailer, body: string(b)}
}

func TestRequestsOfOneConnectionShareOneUpstream(t *testing.T) {
	a := startBackend(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "a") }, nil)
	b := startBackend(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "b") }, nil)
	front := startFront(t, a.addr)
	c := oneConnClient(t)
	for i := range 20 {
		to, want := a.addr, "a"
		if i%2 == 1 {
			to, want = b.addr, "b"
		}
		got := get(t, c, "http://"+front+"/", http.Header{"X-To": {to}})
		if got.code != http.StatusOK || got.body != want {
			t.Fatalf("request %d for %s: %d %q, want %q", i, to, got.code, got.body, want)
		}
	}
	// Each key keeps its own connection: a request never reaches the
	// upstream of another key, and none needs a new connection.
	if a.conns.Load() != 1 || b.conns.Load() != 1 {
		t.Fatalf("upstream connections a=%d b=%d, want 1 each", a.conns.Load(), b.conns.Load())
	}
}

func TestHopByHopHeadersStayOnTheirHop(t *testing.T) {
	var got http.Header
	be := startBackend(t, func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Connection", "X-Hop")
		w.Header().Set("X-Hop", "backend-only")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-End", "kept")
	}, nil)
	front := startFront(t, be.addr)
	resp := get(t, oneConnClient(t), "http://"+front+"/", http.Header{
		"Connection":          {"X-Secret"},
		"X-Secret":            {"front-only"},
		"Proxy-Authorization": {"Basic Zm9vOmJhcg=="},
		"Te":                  {"trailers, deflate"},
		"X-Kept":              {"yes"},
	})
	for _, h := range []string{"X-Secret", "Proxy-Authorization", "Connection"} {
		if v := got.Get(h); v != "" {
			t.Errorf("backend got %s: %q, a hop-by-hop header", h, v)
		}
	}
	if got.Get("Te") != "trailers" || got.Get("X-Kept") != "yes" {
		t.Errorf("backend got Te %q X-Kept %q, want trailers and yes", got.Get("Te"), got.Get("X-Kept"))
	}
	if h := resp.header; h.Get("X-Hop") != "" || h.Get("Keep-Alive") != "" || h.Get("X-End") != "kept" {
		t.Errorf("client got X-Hop %q Keep-Alive %q X-End %q", h.Get("X-Hop"), h.Get("Keep-Alive"), h.Get("X-End"))
	}
}

func TestTrailersReachTheClient(t *testing.T) {
	be := startBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		fmt.Fprint(w, "body")
		w.Header().Set("X-Sum", "42")
		w.Header().Set(http.TrailerPrefix+"X-Late", "undeclared")
	}, nil)
	front := startFront(t, be.addr)
	got := get(t, oneConnClient(t), "http://"+front+"/", nil)
	if got.body != "body" || got.trailer.Get("X-Sum") != "42" || got.trailer.Get("X-Late") != "undeclared" {
		t.Fatalf("body %q trailers %v, want body and X-Sum 42, X-Late undeclared", got.body, got.trailer)
	}
}

func TestBodyAndExpectContinue(t *testing.T) {
	be := startBackend(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s:%d", r.Method, len(b))
	}, nil)
	front := startFront(t, be.addr)
	c := oneConnClient(t)
	payload := strings.Repeat("p", 300<<10)
	for _, expect := range []bool{false, true} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+front+"/", strings.NewReader(payload))
		if expect {
			req.Header.Set("Expect", "100-continue")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf("POST:%d", len(payload)); string(b) != want {
			t.Fatalf("expect=%v: %q, want %q", expect, b, want)
		}
	}
	if be.conns.Load() != 1 {
		t.Fatalf("upstream connections %d, want 1", be.conns.Load())
	}
}

// A backend that answers before it has read a large body must not
// deadlock the forwarder, which writes the body beside the read.
func TestEarlyAnswerToALargeBody(t *testing.T) {
	be := startBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
	}, nil)
	front := startFront(t, be.addr)
	c, err := net.Dial("tcp", front)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const size = 32 << 20
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", size)
	go func() {
		chunk := make([]byte, 64<<10)
		for sent := 0; sent < size; sent += len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", resp.StatusCode)
	}
}

// A streamed answer reaches the client piece by piece, and a client that
// goes away ends the upstream request.
func TestStreamFlushesAndClientGoneEndsUpstream(t *testing.T) {
	gone := make(chan struct{})
	be := startBackend(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "first\n")
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
		close(gone)
	}, nil)
	front := startFront(t, be.addr)
	c, err := net.Dial("tcp", front)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(c, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first piece %q, %v: not flushed", line, err)
	}
	_ = c.Close()
	select {
	case <-gone:
	case <-time.After(20 * time.Second):
		t.Fatal("the upstream request did not end when the client went away")
	}
}

// An idle upstream connection that its peer closed is not used for the
// next request, which goes on a new one, a POST as well. (A close that
// crosses a request already written is a 502, never a second run:
// TestNoRequestIsSentTwice.)
func TestIdleConnectionClosedByThePeer(t *testing.T) {
	var closed atomic.Int64
	be := startBackend(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "ok %d", len(b))
	}, func(c net.Conn, st http.ConnState) {
		if st == http.StateIdle {
			_ = c.Close()
			closed.Add(1)
		}
	})
	front := startFront(t, be.addr)
	c := oneConnClient(t)
	for i := range 20 {
		var body io.Reader
		want := "ok 0"
		if i%2 == 1 {
			body, want = strings.NewReader("hello"), "ok 5"
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+front+"/", body)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK || string(got) != want {
			t.Fatalf("request %d: %d %q", i, res.StatusCode, got)
		}
		// The backend has closed the connection before the next request
		// comes: the forwarder must notice it (a peek finds the end).
		deadline := time.Now().Add(10 * time.Second)
		for closed.Load() < int64(i+1) {
			if time.Now().After(deadline) {
				t.Fatal("the backend did not close its idle connection")
			}
			time.Sleep(time.Millisecond)
		}
	}
	if n := be.conns.Load(); n != 20 {
		t.Fatalf("upstream connections %d, want one per request (each closed when idle)", n)
	}
}

// A request the upstream may have seen is never sent again: an answer
// that does not come is a 502, and the backend ran the request once.
func TestNoRequestIsSentTwice(t *testing.T) {
	var runs atomic.Int64
	be := startBackend(t, func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close() // no answer
		}
	}, nil)
	front := startFront(t, be.addr)
	c := oneConnClient(t)
	if got := get(t, c, "http://"+front+"/", nil); got.code != http.StatusBadGateway {
		t.Fatalf("answer %d %q, want 502", got.code, got.body)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the backend ran the GET %d times", n)
	}
}

func TestDialFailureIsTheCallersToAnswer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := l.Addr().String()
	_ = l.Close()
	front := startFront(t, refused)
	got := get(t, oneConnClient(t), "http://"+front+"/", nil)
	if got.code != http.StatusBadGateway || !strings.HasPrefix(got.body, "front: ") || !strings.Contains(got.body, "refused") {
		t.Fatalf("%d %q, want the front's 502 naming the refusal", got.code, got.body)
	}
}
