package rawhttp

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Request is one request a Recorder read, with net/http's strict parser,
// from what a hop wrote.
type Request struct {
	// Seq numbers the requests in the order they were read, from 1; Conn
	// numbers the connection they came on, from 1.
	Seq, Conn int
	Method    string
	Target    string
	Host      string
	Header    http.Header
	Body      []byte
	Trailer   http.Header
}

// Recorder is a backend that records every byte each connection sends it
// and parses them into requests, so a test sees exactly what the last hop
// wrote: a request smuggled in another's body arrives here as a request
// of its own. Each request is answered by Answer.
type Recorder struct {
	ln net.Listener

	// What SetAnswer, SetCloseAfterAnswer and SetIdleTimeout set, under mu:
	// connections are served from the moment it listens.
	answer           func(req Request) string
	closeAfterAnswer bool
	idleTimeout      time.Duration

	mu       sync.Mutex
	requests []Request
	raw      [][]byte
	failures []error
	conns    int
	open     atomic.Int64
	wg       sync.WaitGroup
	live     map[net.Conn]struct{}
}

// NewRecorder listens on addr (host:port, port 0 for any).
func NewRecorder(addr string) (*Recorder, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	r := &Recorder{ln: ln, live: map[net.Conn]struct{}{}}
	go r.accept()
	return r, nil
}

// SetAnswer sets what answers each request: the raw answer to write to
// req, or "" to close the connection without one. It is read once per
// request; by default the answer is 200 with the body "req <Seq>".
func (r *Recorder) SetAnswer(answer func(req Request) string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answer = answer
}

// SetCloseAfterAnswer makes it close each connection after its first
// answer, without saying so in the answer, as a backend's idle timeout
// does.
func (r *Recorder) SetCloseAfterAnswer(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closeAfterAnswer = on
}

// SetIdleTimeout makes it close a connection that sends no new request
// for d (0: never), as backends do with their idle keep-alives.
func (r *Recorder) SetIdleTimeout(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.idleTimeout = d
}

// Addr is the address it listens on.
func (r *Recorder) Addr() string { return r.ln.Addr().String() }

// Close stops it and closes every connection.
func (r *Recorder) Close() error {
	err := r.ln.Close()
	r.mu.Lock()
	for c := range r.live {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return err
}

// Requests are the requests read so far.
func (r *Recorder) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.requests...)
}

// Failures are the errors net/http's parser met in what was sent (a
// malformed head or body), one per connection that sent one.
func (r *Recorder) Failures() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.failures...)
}

// Conns is how many connections it accepted; Open how many are open.
func (r *Recorder) Conns() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conns
}

// Open is how many of its connections are still open.
func (r *Recorder) Open() int { return int(r.open.Load()) }

// Raw is every byte connection n (from 1) sent.
func (r *Recorder) Raw(n int) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n < 1 || n > len(r.raw) {
		return nil
	}
	return bytes.Clone(r.raw[n-1])
}

func (r *Recorder) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		r.conns++
		n := r.conns
		r.raw = append(r.raw, nil)
		r.live[c] = struct{}{}
		r.mu.Unlock()
		r.open.Add(1)
		r.wg.Add(1)
		go r.serve(c, n)
	}
}

// tee records what a connection sends as it is read.
type tee struct {
	r *Recorder
	c net.Conn
	n int
}

func (t tee) Read(p []byte) (int, error) {
	n, err := t.c.Read(p)
	if n > 0 {
		t.r.mu.Lock()
		t.r.raw[t.n-1] = append(t.r.raw[t.n-1], p[:n]...)
		t.r.mu.Unlock()
	}
	return n, err
}

func (r *Recorder) serve(c net.Conn, n int) {
	defer r.wg.Done()
	defer func() {
		_ = c.Close()
		r.mu.Lock()
		delete(r.live, c)
		r.mu.Unlock()
		r.open.Add(-1)
	}()
	br := bufio.NewReader(tee{r: r, c: c, n: n})
	for {
		r.mu.Lock()
		idle := r.idleTimeout
		r.mu.Unlock()
		if idle > 0 {
			_ = c.SetReadDeadline(time.Now().Add(idle))
		}
		if _, err := br.Peek(1); err != nil {
			return // the hop closed the connection between requests, or it idled
		}
		_ = c.SetReadDeadline(time.Time{})
		hr, err := http.ReadRequest(br)
		var body []byte
		if err == nil {
			body, err = io.ReadAll(hr.Body)
		}
		if err != nil {
			r.mu.Lock()
			r.failures = append(r.failures, fmt.Errorf("connection %d: %w", n, err))
			r.mu.Unlock()
			return
		}
		r.mu.Lock()
		req := Request{Seq: len(r.requests) + 1, Conn: n, Method: hr.Method, Target: hr.RequestURI, Host: hr.Host,
			Header: hr.Header, Body: body, Trailer: hr.Trailer}
		r.requests = append(r.requests, req)
		answer, closeAfter := r.answer, r.closeAfterAnswer
		r.mu.Unlock()
		out := ""
		if answer != nil {
			out = answer(req)
		} else {
			msg := fmt.Sprintf("req %d", req.Seq)
			out = fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(msg), msg)
		}
		if out == "" {
			return
		}
		if _, err := io.WriteString(c, out); err != nil || closeAfter {
			return
		}
	}
}
