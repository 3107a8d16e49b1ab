package streams

import (
	"crypto/tls"
	"io"
	"net"
	"sync"
)

// copyBufferSize is larger than io.Copy's 32 KiB: a stream is encrypted,
// so it cannot be spliced, and each read and write is a system call plus
// a pass of AES-GCM; with 256 KiB a round carries 16 TLS records.
const copyBufferSize = 256 << 10

var buffers = sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}

// maxRecord is the most plaintext one TLS record carries.
const maxRecord = 16 << 10

// batches hold the records of one Write, sent in one system call.
var batches = sync.Pool{New: func() any { b := make([]byte, 0, copyBufferSize+copyBufferSize/16); return &b }}

// Conn is one stream connection, either end. io.Copy to or from it uses
// the large buffers; CloseWrite (a TLS close_notify) passes half-closes on.
type Conn struct {
	*tls.Conn
	out *batchWriter
}

// newConn wraps raw in TLS (made by wrap) with write batching under it.
func newConn(raw net.Conn, wrap func(net.Conn) *tls.Conn) *Conn {
	bw := &batchWriter{Conn: raw}
	return &Conn{Conn: wrap(bw), out: bw}
}

// Write encrypts p and sends its records (16 KiB each at most) in one
// system call, not one per record: a bulk copy spends most of its time in
// system calls.
func (c *Conn) Write(p []byte) (int, error) {
	if len(p) <= maxRecord {
		// One record: nothing to batch (small round trips, such as
		// a database's, stay as they were).
		return c.Conn.Write(p)
	}
	c.out.start()
	n, err := c.Conn.Write(p)
	if ferr := c.out.flush(); err == nil {
		err = ferr
	}
	return n, err
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
	return io.CopyBuffer(onlyWriter{c}, onlyReader{r}, *b)
}

// batchWriter collects what TLS writes between start and flush; at other
// times (the handshake, alerts, a reply the reading side sends) it writes
// through. TLS holds its own write lock for a whole record sequence, so
// what lands in a batch stays in order.
type batchWriter struct {
	net.Conn
	mu    sync.Mutex
	batch *[]byte
}

func (b *batchWriter) start() {
	buf := batches.Get().(*[]byte)
	b.mu.Lock()
	b.batch = buf
	b.mu.Unlock()
}

func (b *batchWriter) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.batch == nil {
		return b.Conn.Write(p)
	}
	*b.batch = append(*b.batch, p...)
	return len(p), nil
}

func (b *batchWriter) flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	buf := b.batch
	b.batch = nil
	_, err := b.Conn.Write(*buf)
	*buf = (*buf)[:0]
	if cap(*buf) <= 2*copyBufferSize { // an outsized batch is not kept
		batches.Put(buf)
	}
	return err
}
