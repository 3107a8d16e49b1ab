// Package httpfwd forwards plain HTTP/1.1 requests over a connection
// pinned to the inbound connection they came on, in the handler's own
// goroutine: the request is written with net/http's serialiser and the
// answer read back with http.ReadResponse. The edge and the agent use it
// in place of httputil.ReverseProxy and an http.Transport for every
// request that is not an upgrade. Two chained hops of each, in one run
// of the transport bench, served 5.5k against 10.3k req/s
// (docs/benchmarks.md): the Transport's read and write goroutines, and the
// hand-offs between them and the handler, cost more than the parse. Framing stays net/http's
// on both sides, so requests and answers are checked exactly as before.
package httpfwd

import (
	"bufio"
	"net"
	"sync"

	"code.tuna.am/tuna/k8s-operator/internal/httprule"
)

// Conn is one outbound connection and its buffered ends; w counts the
// bytes the connection accepted since the last request began, for the
// rulebook's replay rule.
type Conn struct {
	c     net.Conn
	key   string
	probe *httprule.Prober
	w     httprule.Written
	br    *bufio.Reader
	bw    *bufio.Writer
}

var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}
)

// NewConn wraps c, opened for key (what may reuse it: a host, an upstream
// address).
func NewConn(c net.Conn, key string) *Conn {
	u := &Conn{c: c, key: key, probe: httprule.NewProber(c), w: httprule.Written{W: c}}
	u.br = readers.Get().(*bufio.Reader)
	u.br.Reset(c)
	u.bw = writers.Get().(*bufio.Writer)
	u.bw.Reset(&u.w)
	return u
}

// Close closes the connection. The buffers go back to their pools only
// here, after the last use.
func (u *Conn) Close() {
	_ = u.c.Close()
	u.br.Reset(nil)
	readers.Put(u.br)
	u.bw.Reset(nil)
	writers.Put(u.bw)
}

// reusable reports whether a kept connection can carry the next request:
// nothing is left unread in its buffer, its owner has not taken it back
// (its Lease, now held), and its peer has neither closed it nor sent
// anything unasked (httprule.Quiet).
func (u *Conn) reusable() bool {
	if u.br.Buffered() > 0 {
		return false
	}
	if l := httprule.LeaseOf(u.c); l != nil && !l.Acquire() {
		return false
	}
	return u.probe.Quiet()
}

// maxIdle is how many idle connections one inbound connection keeps
// unless told otherwise (Keep): one for HTTP/1, a few to spare.
const maxIdle = 4

// Idle is the idle outbound connections of one inbound connection. Its
// zero value is ready; Close it when the inbound connection closes.
type Idle struct {
	mu     sync.Mutex
	conns  []*Conn
	max    int // 0: maxIdle
	closed bool
}

// Keep lets p keep up to n idle connections: an HTTP/2 connection's
// streams run at once, each on an outbound connection of its own, and
// one closed for want of room is one opened again by the next stream.
func (p *Idle) Keep(n int) {
	p.mu.Lock()
	p.max = n
	p.mu.Unlock()
}

// take returns an idle connection for key, or nil.
func (p *Idle) take(key string) *Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.conns) - 1; i >= 0; i-- {
		if u := p.conns[i]; u.key == key {
			p.conns = append(p.conns[:i], p.conns[i+1:]...)
			return u
		}
	}
	return nil
}

// put keeps u for a later request, or closes it when the inbound
// connection is gone or keeps enough. A kept connection is idle: its
// owner may take it back (httprule.Lease).
func (p *Idle) put(u *Conn) {
	p.mu.Lock()
	limit := p.max
	if limit == 0 {
		limit = maxIdle
	}
	if p.closed || len(p.conns) >= limit {
		p.mu.Unlock()
		u.Close()
		return
	}
	p.conns = append(p.conns, u)
	p.mu.Unlock()
	if l := httprule.LeaseOf(u.c); l != nil {
		l.Release()
	}
}

// Close closes the idle connections; later ones are closed as they are
// put back.
func (p *Idle) Close() {
	p.mu.Lock()
	conns := p.conns
	p.conns, p.closed = nil, true
	p.mu.Unlock()
	for _, u := range conns {
		u.Close()
	}
}
