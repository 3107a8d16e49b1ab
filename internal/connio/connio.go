// Package connio keeps io.Copy's fast paths working through connection
// wrappers. A type that embeds a net.Conn hides the inner connection's
// WriteTo and ReadFrom (an SSH channel read in place, a stream's large
// buffers), so io.Copy would fall back to its own 32 KiB buffer; wrappers
// forward to these instead.
package connio

import (
	"io"
	"net"
)

type onlyWriter struct{ io.Writer }
type onlyReader struct{ io.Reader }

// WriteTo copies inner to w with inner's own WriteTo when it has one.
func WriteTo(inner net.Conn, w io.Writer) (int64, error) {
	if wt, ok := inner.(io.WriterTo); ok {
		return wt.WriteTo(w)
	}
	return io.Copy(w, onlyReader{inner})
}

// ReadFrom copies r into inner with inner's own ReadFrom when it has one.
func ReadFrom(inner net.Conn, r io.Reader) (int64, error) {
	if rf, ok := inner.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(onlyWriter{inner}, r)
}

// DirectReaderOf is inner's DirectReader (an SSH channel read without
// its background reader; chanconn.Conn.DirectReader), for wrappers to
// forward; false when inner has none.
func DirectReaderOf(inner net.Conn) (io.Reader, bool) {
	if d, ok := inner.(interface{ DirectReader() (io.Reader, bool) }); ok {
		return d.DirectReader()
	}
	return nil, false
}
