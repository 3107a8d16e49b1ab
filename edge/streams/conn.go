package streams

import (
	"crypto/tls"
	"io"
	"sync"
)

// copyBufferSize is larger than io.Copy's 32 KiB: a stream is encrypted,
// so it cannot be spliced, and each read and write is a system call plus
// a pass of AES-GCM over at most 16 KiB records; 256 KiB per round cut
// the system calls of a bulk copy and raised a two-hop echo on loopback
// from about 0.48 to 0.51 of direct (docs/benchmarks.md).
const copyBufferSize = 256 << 10

var buffers = sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}

// Conn is one stream connection, either end. io.Copy to or from it uses
// the large buffers; CloseWrite (a TLS close_notify) passes half-closes on.
type Conn struct {
	*tls.Conn
}

type onlyWriter struct{ io.Writer }
type onlyReader struct{ io.Reader }

// WriteTo copies the stream to w until EOF.
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	b := buffers.Get().(*[]byte)
	defer buffers.Put(b)
	return io.CopyBuffer(onlyWriter{w}, onlyReader{c.Conn}, *b)
}

// ReadFrom copies r into the stream until EOF.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	b := buffers.Get().(*[]byte)
	defer buffers.Put(b)
	return io.CopyBuffer(onlyWriter{c.Conn}, onlyReader{r}, *b)
}
