package h1

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testRouter forwards requests for relay.test to addr, with the edge's
// kind of forwarding header, and leaves every other host to the fallback.
type testRouter struct {
	addr string
	mu   sync.Mutex
	done []string
}

func (r *testRouter) Route(h *Head, remote string) (Route, bool) {
	if string(h.Host) != "relay.test" {
		return Route{}, false
	}
	return Route{
		Key:  r.addr,
		Dial: func(ctx context.Context) (net.Conn, error) { return (&net.Dialer{}).DialContext(ctx, "tcp", r.addr) },
		Set:  []Field{{Name: []byte("X-Forwarded-For"), Value: []byte("203.0.113.7")}},
		Drop: []string{"x-forwarded-for"},
		Fail: func(err error) Answer { return TextAnswer(http.StatusBadGateway, "relay: "+err.Error()) },
		Done: func(status int, in, out int64, _ time.Duration) {
			r.mu.Lock()
			r.done = append(r.done, fmt.Sprintf("%d %d %d", status, in, out))
			r.mu.Unlock()
		},
	}, true
}

func (r *testRouter) exchanges() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.done...)
}

// startRelay serves a relay to upstream (an address) on loopback; the
// fallback answers "fallback <proto>".
func startRelay(t *testing.T, upstream string) (*Server, *testRouter, string) {
	t.Helper()
	rt := &testRouter{addr: upstream}
	fallback := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "fallback %s", r.Proto)
	})}
	s := &Server{Router: rt, Fallback: fallback, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	return s, rt, ln.Addr().String()
}

// startBackend serves h on loopback and counts its connections.
func startBackend(t *testing.T, h http.Handler) (string, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	srv := &http.Server{Handler: h, ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), &conns
}

// rawClient is one client connection speaking HTTP/1.1 by hand.
type rawClient struct {
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &rawClient{c: c, br: bufio.NewReader(c)}
}

// answer is what a client read of one answer, its body read whole.
type answer struct {
	StatusCode      int
	Header, Trailer http.Header
	Close           bool
}

// do sends raw and reads one answer to a request of method.
func (rc *rawClient) do(t *testing.T, method, raw string) (answer, string) {
	t.Helper()
	if _, err := io.WriteString(rc.c, raw); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(rc.br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer func() { _ = res.Body.Close() }()
	defer func() { _ = res.Body.Close() }()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return answer{StatusCode: res.StatusCode, Header: res.Header, Trailer: res.Trailer, Close: res.Close}, string(body)
}

func get(host, path string, extra ...string) string {
	return "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n" + strings.Join(extra, "") + "\r\n"
}

func TestRelayForwardsOnOnePinnedConnection(t *testing.T) {
	addr, conns := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Keep-Alive", "timeout=5") // hop-by-hop: not passed on
		w.Header().Set("X-Seen", fmt.Sprintf("host=%s xff=%q secret=%q te=%q", r.Host, r.Header.Values("X-Forwarded-For"),
			r.Header.Get("X-Secret"), r.Header.Get("Te")))
		fmt.Fprintf(w, "hello %s", r.URL.RequestURI())
	}))
	s, rt, relay := startRelay(t, addr)
	c := dialRaw(t, relay)
	for i := range 3 {
		res, body := c.do(t, "GET", get("relay.test", fmt.Sprintf("/p%d?q=1", i),
			"X-Forwarded-For: 10.0.0.1\r\n", "Connection: keep-alive, X-Secret\r\n", "X-Secret: s\r\n", "TE: trailers\r\n"))
		if want := fmt.Sprintf("hello /p%d?q=1", i); res.StatusCode != 200 || body != want {
			t.Fatalf("answer %d %q, want 200 %q", res.StatusCode, body, want)
		}
		if got, want := res.Header.Get("X-Seen"), `host=relay.test xff=["203.0.113.7"] secret="" te="trailers"`; got != want {
			t.Fatalf("the backend saw %s, want %s", got, want)
		}
		if res.Header.Get("Keep-Alive") != "" || res.Close {
			t.Fatalf("hop-by-hop answer fields passed on, or the connection closes: %v", res.Header)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("the backend saw %d connections for 3 requests on one client connection, want 1", n)
	}
	waitFor(t, func() bool { return len(rt.exchanges()) == 3 })
	if got := rt.exchanges(); got[0] != "200 0 13" {
		t.Fatalf("exchanges reported %v", got)
	}
	// Between requests the connection holds its read buffer only: no write
	// buffer, and its pinned upstream connection none.
	waitFor(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for c, busy := range s.conns {
			return !busy && c.bw == nil && len(c.ups) == 1 && c.ups[0].br == nil && c.ups[0].bw == nil
		}
		return false
	})
}

func TestRelayBodies(t *testing.T) {
	addr, _ := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		w.Header().Set("Trailer", "Grpc-Status")
		fmt.Fprintf(w, "%s %d %v %d", r.Method, len(b), r.TransferEncoding, r.ContentLength)
		w.Header().Set("Grpc-Status", "0")
	}))
	_, _, relay := startRelay(t, addr)
	c := dialRaw(t, relay)
	big := strings.Repeat("x", 1<<20)
	cases := []struct{ name, raw, want string }{
		{"length, arrived whole", "POST / HTTP/1.1\r\nHost: relay.test\r\nContent-Length: 5\r\n\r\nhello", "POST 5 [] 5"},
		{"length, 1 MiB", "PUT / HTTP/1.1\r\nHost: relay.test\r\nContent-Length: 1048576\r\n\r\n" + big, "PUT 1048576 [] 1048576"},
		{"chunked", "POST / HTTP/1.1\r\nHost: relay.test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nT: v\r\n\r\n", "POST 5 [chunked] -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, body := c.do(t, "POST", tc.raw)
			if body != tc.want {
				t.Fatalf("backend answered %q, want %q", body, tc.want)
			}
			if res.Trailer.Get("Grpc-Status") != "0" {
				t.Fatalf("trailers lost: %v", res.Trailer)
			}
		})
	}
}

func TestRelayAnswersWithoutBody(t *testing.T) {
	addr, _ := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/204":
			w.WriteHeader(204)
		case "/304":
			w.WriteHeader(304)
		default:
			w.Header().Set("Content-Length", "5")
			_, _ = io.WriteString(w, "hello")
		}
	}))
	_, _, relay := startRelay(t, addr)
	c := dialRaw(t, relay)
	for _, tc := range []struct{ method, path, body string }{
		{"HEAD", "/", ""}, {"GET", "/204", ""}, {"GET", "/304", ""}, {"GET", "/", "hello"},
	} {
		raw := strings.Replace(get("relay.test", tc.path), "GET", tc.method, 1)
		if _, body := c.do(t, tc.method, raw); body != tc.body {
			t.Fatalf("%s %s: body %q, want %q", tc.method, tc.path, body, tc.body)
		}
	}
}

// rawBackend answers each connection's first request with answer, then
// closes it.
func rawBackend(t *testing.T, answer func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				answer(c)
			}()
		}
	}()
	return ln.Addr().String()
}

func TestRelayAnswerUntilClose(t *testing.T) {
	addr := rawBackend(t, func(c net.Conn) { _, _ = io.WriteString(c, "HTTP/1.0 200 OK\r\n\r\nuntil the end") })
	_, _, relay := startRelay(t, addr)
	c := dialRaw(t, relay)
	res, body := c.do(t, "GET", get("relay.test", "/"))
	if body != "until the end" || !res.Close {
		t.Fatalf("body %q close %v: want the whole body and the client connection closed", body, res.Close)
	}
}

func TestRelayFailures(t *testing.T) {
	refused := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		return addr
	}()
	t.Run("refused upstream", func(t *testing.T) {
		_, rt, relay := startRelay(t, refused)
		c := dialRaw(t, relay)
		res, body := c.do(t, "GET", get("relay.test", "/"))
		if res.StatusCode != 502 || !strings.Contains(body, "connection refused") || res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("%d %q %v, want the relay's 502 naming the refusal", res.StatusCode, body, res.Header)
		}
		// The connection stays usable after the relay's own answer.
		if res, _ := c.do(t, "GET", get("relay.test", "/")); res.StatusCode != 502 {
			t.Fatalf("second request: %d", res.StatusCode)
		}
		// Done is told after the answer went out.
		waitFor(t, func() bool { return len(rt.exchanges()) == 2 })
		if got := rt.exchanges(); got[0] != "502 0 0" {
			t.Fatalf("exchanges reported %v", got)
		}
	})
	t.Run("malformed answer", func(t *testing.T) {
		addr := rawBackend(t, func(c net.Conn) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
		})
		_, _, relay := startRelay(t, addr)
		res, _ := dialRaw(t, relay).do(t, "GET", get("relay.test", "/"))
		if res.StatusCode != 502 {
			t.Fatalf("an answer with two framings: %d, want 502", res.StatusCode)
		}
	})
	t.Run("answer head too large", func(t *testing.T) {
		addr := rawBackend(t, func(c net.Conn) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("b", 20<<10)+"\r\nContent-Length: 0\r\n\r\n")
		})
		_, _, relay := startRelay(t, addr)
		res, body := dialRaw(t, relay).do(t, "GET", get("relay.test", "/"))
		if res.StatusCode != 502 || !strings.Contains(body, "larger than 16 KiB") {
			t.Fatalf("%d %q, want 502 naming the limit", res.StatusCode, body)
		}
	})
}

func TestRelayHandsOverWhatItDoesNotTake(t *testing.T) {
	addr, _ := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "relayed") }))
	_, _, relay := startRelay(t, addr)
	for name, first := range map[string]string{
		"another host": get("elsewhere.test", "/"),
		"HTTP/1.0":     "GET / HTTP/1.0\r\nHost: relay.test\r\n\r\n",
		"upgrade":      get("relay.test", "/", "Connection: Upgrade\r\n", "Upgrade: websocket\r\n"),
		"expect":       "POST / HTTP/1.1\r\nHost: relay.test\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\nx",
		"bare LF":      "GET / HTTP/1.1\nHost: relay.test\n\n",
		"large head":   get("relay.test", "/", "X-Big: "+strings.Repeat("b", 10<<10)+"\r\n"),
	} {
		t.Run(name, func(t *testing.T) {
			c := dialRaw(t, relay)
			method, _, _ := strings.Cut(first, " ")
			res, body := c.do(t, method, first)
			if !strings.HasPrefix(body, "fallback HTTP/1.") {
				t.Fatalf("first request answered %q, want the fallback's", body)
			}
			if res.Close {
				return // HTTP/1.0, or a body net/http left unread
			}
			// The connection stays with the fallback from then on.
			if _, body := c.do(t, "GET", get("relay.test", "/")); body != "fallback HTTP/1.1" {
				t.Fatalf("next request answered %q, want the fallback's", body)
			}
		})
	}
}

func TestRelayStreamsAnswerAsItComes(t *testing.T) {
	release := make(chan struct{})
	addr, _ := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "first;")
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, "second")
	}))
	_, _, relay := startRelay(t, addr)
	c := dialRaw(t, relay)
	if _, err := io.WriteString(c.c, get("relay.test", "/")); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	buf := make([]byte, len("first;"))
	if _, err := io.ReadFull(res.Body, buf); err != nil || string(buf) != "first;" {
		t.Fatalf("first piece %q, %v: the relay held it back", buf, err)
	}
	close(release)
	rest, err := io.ReadAll(res.Body)
	if err != nil || string(rest) != "second" {
		t.Fatalf("rest %q, %v", rest, err)
	}
}

func TestRelayEarlyAnswerClosesTheConnection(t *testing.T) {
	addr, _ := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
	}))
	_, rt, relay := startRelay(t, addr)
	c := dialRaw(t, relay)
	// The head and the first part of a body that never ends.
	if _, err := io.WriteString(c.c, "POST / HTTP/1.1\r\nHost: relay.test\r\nContent-Length: 100000000\r\n\r\npart"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(c.br, nil)
	if err != nil || res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("answer %v, %v: want the backend's 413", res, err)
	}
	defer func() { _ = res.Body.Close() }()
	_, _ = io.ReadAll(res.Body)
	// The rest of the body was never read, so the connection ends.
	_ = c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.br.ReadByte(); err != io.EOF {
		t.Fatalf("after an early answer the connection gave %v, want EOF", err)
	}
	waitFor(t, func() bool { return len(rt.exchanges()) == 1 })
	if got := rt.exchanges()[0]; !strings.HasPrefix(got, "413 ") {
		t.Fatalf("exchange reported %q", got)
	}
}

func TestRelayShutdown(t *testing.T) {
	release, arrived := make(chan struct{}), make(chan struct{})
	addr, _ := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(arrived)
			<-release
		}
		_, _ = io.WriteString(w, "done")
	}))
	s, _, relay := startRelay(t, addr)
	idle := dialRaw(t, relay)
	if _, body := idle.do(t, "GET", get("relay.test", "/")); body != "done" {
		t.Fatal(body)
	}
	busy := dialRaw(t, relay)
	if _, err := io.WriteString(busy.c, get("relay.test", "/slow")); err != nil {
		t.Fatal(err)
	}
	// The slow request is at the backend, so its connection is busy; and
	// the first connection's exchange is over, so it is idle. (Counting
	// busy connections could see the first one still finishing and this
	// one not yet read: Shutdown then closed this one with its request
	// unread, and the kernel reset it.)
	<-arrived
	waitFor(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		n := 0
		for _, active := range s.conns {
			if active {
				n++
			}
		}
		return n == 1
	})
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	// The idle connection is closed at once.
	_ = idle.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := idle.br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection: %v, want EOF", err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) with a request in flight", err)
	default:
	}
	close(release)
	res, err := http.ReadResponse(busy.br, nil)
	if err != nil || res.StatusCode != 200 || !res.Close {
		t.Fatalf("in-flight request: %v %v; want 200 with Connection: close", res, err)
	}
	defer func() { _ = res.Body.Close() }()
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := net.DialTimeout("tcp", relay, time.Second); err == nil {
		t.Fatal("the listener still accepts after Shutdown")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// directConn is a connection with a DirectReader, like an SSH channel:
// reads through Read, which the relay should not use while it sets no
// deadline, are counted apart from direct ones.
type directConn struct {
	net.Conn
	viaRead, viaDirect *atomic.Int64
}

func (c directConn) Read(p []byte) (int, error) {
	c.viaRead.Add(1)
	return c.Conn.Read(p)
}

func (c directConn) DirectReader() (io.Reader, bool) { return countedReader{c.Conn, c.viaDirect}, true }

type countedReader struct {
	r io.Reader
	n *atomic.Int64
}

func (r countedReader) Read(p []byte) (int, error) {
	r.n.Add(1)
	return r.r.Read(p)
}

// directListener hands out directConns.
type directListener struct {
	net.Listener
	viaRead, viaDirect *atomic.Int64
}

func (l directListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return directConn{Conn: c, viaRead: l.viaRead, viaDirect: l.viaDirect}, nil
}

// A relay without timeouts reads its client connections, and every relay
// its upstream ones, through their DirectReader; a connection handed
// over is read through Read again once the relay's buffer is empty, so
// that net/http's deadlines work on it.
func TestRelayReadsDirectlyWhereNoDeadlineApplies(t *testing.T) {
	addr, _ := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	var upRead, upDirect, inRead, inDirect atomic.Int64
	rt := &testRouter{addr: addr}
	router := routerFunc(func(h *Head, remote string) (Route, bool) {
		r, ok := rt.Route(h, remote)
		dial := r.Dial
		r.Dial = func(ctx context.Context) (net.Conn, error) {
			c, err := dial(ctx)
			if err != nil {
				return nil, err
			}
			return directConn{Conn: c, viaRead: &upRead, viaDirect: &upDirect}, nil
		}
		return r, ok
	})
	fallback := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "fallback %d", len(b))
	})}
	s := &Server{Router: router, Fallback: fallback}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(directListener{Listener: ln, viaRead: &inRead, viaDirect: &inDirect}) }()
	t.Cleanup(func() { _ = s.Close() })

	c := dialRaw(t, ln.Addr().String())
	for range 3 {
		if _, body := c.do(t, "GET", get("relay.test", "/")); body != "ok" {
			t.Fatalf("relayed answer %q", body)
		}
	}
	if upRead.Load() != 0 || upDirect.Load() == 0 || inRead.Load() != 0 || inDirect.Load() == 0 {
		t.Fatalf("reads: upstream %d through Read, %d direct; client %d through Read, %d direct", upRead.Load(), upDirect.Load(), inRead.Load(), inDirect.Load())
	}
	// Handed over with the head and a part of the body in the relay's
	// buffer; the rest of the body comes through Read.
	if _, err := io.WriteString(c.c, "POST / HTTP/1.1\r\nHost: elsewhere.test\r\nContent-Length: 10\r\n\r\n01234"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return inRead.Load() > 0 })
	if _, err := io.WriteString(c.c, "56789"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	if body, _ := io.ReadAll(res.Body); string(body) != "fallback 10" {
		t.Fatalf("handed-over answer %q, want the fallback's with the whole body", body)
	}
}

type routerFunc func(h *Head, remote string) (Route, bool)

func (f routerFunc) Route(h *Head, remote string) (Route, bool) { return f(h, remote) }

// A client still sending a large body when the backend has answered gets
// the answer, then the end of the connection, not a reset that could
// overtake the answer.
func TestRelayEarlyAnswerToALargeUploadIsNotReset(t *testing.T) {
	addr, _ := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
	}))
	_, _, relay := startRelay(t, addr)
	for i := range 5 {
		c := dialRaw(t, relay)
		const size = 512 << 10
		go func() {
			_, _ = io.WriteString(c.c, fmt.Sprintf("POST / HTTP/1.1\r\nHost: relay.test\r\nContent-Length: %d\r\n\r\n", size))
			_, _ = c.c.Write(make([]byte, size))
		}()
		_ = c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		res, err := http.ReadResponse(c.br, nil)
		if err != nil {
			t.Fatalf("upload %d: %v, want the backend's 413", i, err)
		}
		body, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if res.StatusCode != http.StatusRequestEntityTooLarge || err != nil {
			t.Fatalf("upload %d: %d %q %v", i, res.StatusCode, body, err)
		}
	}
}
