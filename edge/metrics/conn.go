package metrics

import (
	"io"
	"net"

	"code.tuna.am/tuna/k8s-operator/internal/connio"
	"code.tuna.am/tuna/k8s-operator/internal/httprule"
)

// TunnelConn counts the bytes of a tunnel channel seen from the edge: what
// it writes into the channel comes from the public client ("in"), what it
// reads goes back to the client ("out").
type TunnelConn struct {
	net.Conn
	M *Metrics
}

func (c TunnelConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.M.Bytes("out", n)
	return n, err
}

func (c TunnelConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.M.Bytes("in", n)
	return n, err
}

// DirectReader passes the channel's direct reader on (see
// chanconn.Conn.DirectReader), still counted.
func (c TunnelConn) DirectReader() (io.Reader, bool) {
	r, ok := connio.DirectReaderOf(c.Conn)
	if !ok {
		return nil, false
	}
	return countingReader{r: r, m: c.M}, true
}

type countingReader struct {
	r io.Reader
	m *Metrics
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.m.Bytes("out", n)
	return n, err
}

// Acquire and Release pass the channel's Lease on (httprule.Lease): a
// connection without one is never taken back.
func (c TunnelConn) Acquire() bool {
	if l := httprule.LeaseOf(c.Conn); l != nil {
		return l.Acquire()
	}
	return true
}

func (c TunnelConn) Release() {
	if l := httprule.LeaseOf(c.Conn); l != nil {
		l.Release()
	}
}
