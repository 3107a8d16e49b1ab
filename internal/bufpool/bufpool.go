// Package bufpool is the copy buffers that the edge's and the agent's
// reverse proxies share. Without it, httputil.ReverseProxy allocates a
// 32 KiB buffer for every response it copies: with small responses that
// was 73 % of all the bytes the data plane allocated (a profile of
// BenchmarkTransportHTTP, docs/benchmarks.md), and the garbage collector's
// work that comes with them.
package bufpool

import "sync"

// Size is the size of each buffer, as io.Copy's own.
const Size = 32 << 10

// Pool is an httputil.BufferPool of Size-byte buffers.
type Pool struct{ p sync.Pool }

// New returns an empty pool.
func New() *Pool {
	return &Pool{p: sync.Pool{New: func() any { b := make([]byte, Size); return &b }}}
}

// Get returns a buffer of Size bytes.
func (p *Pool) Get() []byte { return *(p.p.Get().(*[]byte)) }

// Put returns b to the pool; buffers of another size are dropped.
func (p *Pool) Put(b []byte) {
	if cap(b) != Size {
		return
	}
	b = b[:Size]
	p.p.Put(&b)
}

// Shared is the pool of the process's reverse proxies.
var Shared = New()
