package metrics

import "net"

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
