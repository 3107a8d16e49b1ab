package streams

import (
	"crypto/tls"
	"errors"
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
	in  *drainReader
}

// newConn wraps raw in TLS (made by wrap) with write batching and
// draining reads under it.
func newConn(raw net.Conn, wrap func(net.Conn) *tls.Conn) *Conn {
	bw := &batchWriter{Conn: raw}
	in := &drainReader{Conn: raw}
	return &Conn{Conn: wrap(underTLS{batchWriter: bw, in: in}), out: bw, in: in}
}

// ServerConfig is the edge's TLS configuration of streams with its
// certificate.
func ServerConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS13,
		// Full records from the first byte: see fullRecords.
		DynamicRecordSizingDisabled: fullRecords,
	}
}

// Server wraps raw, a stream connection the edge accepted, in the server
// side of TLS with cfg (ServerConfig).
func Server(raw net.Conn, cfg *tls.Config) *Conn {
	return newConn(raw, func(c net.Conn) *tls.Conn { return tls.Server(c, cfg) })
}

// underTLS is what TLS reads and writes: reads drain, writes batch.
type underTLS struct {
	*batchWriter
	in *drainReader
}

func (u underTLS) Read(p []byte) (int, error) { return u.in.Read(p) }

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

// fullRecords turns off TLS's small first records (meant for a browser's
// first paint): a stream is a pipe, and a full record is how WriteTo tells
// a bulk copy, worth draining, from a small round trip, which is not.
const fullRecords = true

// records hold one TLS record's plaintext: what a stream waits with.
var records = sync.Pool{New: func() any { b := make([]byte, maxRecord); return &b }}

// WriteTo copies the stream to w until EOF. It waits for data with one
// record's buffer (TLS hands out one record per Read), then takes the
// records that have already arrived as well, without waiting, and writes
// them to w in one call: a bulk copy spends most of its time in system
// calls, and this makes one write of up to 256 KiB out of sixteen.
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	first := records.Get().(*[]byte)
	defer records.Put(first)
	var total int64
	for {
		n, err := c.Read(*first)
		if n > 0 {
			var wn int
			var werr error
			if err == nil && (n == len(*first) || c.in.buf != nil) {
				// A full record (a bulk copy), or more already in
				// memory: collect what has arrived.
				wn, werr, err = c.writeDrained(w, (*first)[:n])
			} else {
				wn, werr = w.Write((*first)[:n])
			}
			total += int64(wn)
			if werr != nil {
				return total, werr
			}
		}
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// writeDrained writes head and whatever follows it without waiting, in
// one Write.
func (c *Conn) writeDrained(w io.Writer, head []byte) (int, error, error) {
	b := buffers.Get().(*[]byte)
	defer buffers.Put(b)
	n := copy(*b, head)
	n, rerr := c.drain(*b, n)
	wn, werr := w.Write((*b)[:n])
	return wn, werr, rerr
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
