package h1

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"

	"code.tuna.am/tuna/k8s-operator/internal/httprule"
)

// upstream is a pinned upstream connection. Its buffers are held only
// during an exchange: an idle keep-alive connection costs no buffer.
type upstream struct {
	nc  net.Conn
	key string
	r   io.Reader // nc, or its direct reader
	// direct: r reads nc in place (a tunnel channel), so nc cannot be
	// probed for quiet and its Lease decides; probe is nc's otherwise.
	direct bool
	probe  *httprule.Prober
	w      httprule.Written
	br     *bufio.Reader
	bw     *bufio.Writer
}

// hold takes the buffers for an exchange.
func (u *upstream) hold() {
	u.w.Reset()
	if u.br == nil {
		u.br = upstreamReaders.Get().(*bufio.Reader)
		u.br.Reset(u.r)
		u.bw = writers.Get().(*bufio.Writer)
		u.bw.Reset(&u.w)
	}
}

// release gives the buffers back; the reader must be empty.
func (u *upstream) release() {
	if u.br != nil {
		u.br.Reset(nil)
		upstreamReaders.Put(u.br)
		u.bw.Reset(nil)
		writers.Put(u.bw)
		u.br, u.bw = nil, nil
	}
}

// reusable reports whether a kept connection may carry the next request:
// its owner has not taken it back (its Lease, now held for the exchange)
// and its peer has neither closed it nor sent anything unasked.
func (u *upstream) reusable() bool {
	if l := httprule.LeaseOf(u.nc); l != nil && !l.Acquire() {
		return false
	}
	return u.direct || u.probe.Quiet()
}

// keep marks the connection idle after a complete exchange: from here on
// its owner may take it back.
func (u *upstream) keep() {
	u.release()
	if l := httprule.LeaseOf(u.nc); l != nil {
		l.Release()
	}
}

// errTooLarge is an answer head over the upstream buffer.
var errTooLarge = fmt.Errorf("the answer's head is larger than %d KiB", upstreamBuffer>>10)

// maxPinned is how many upstream connections one client connection
// keeps, one per key.
const maxPinned = 4

// upstream returns the pinned connection for rt's key when it may carry
// the request, or a new one.
func (c *conn) upstream(rt *Route) (*upstream, error) {
	for _, u := range c.ups {
		if u.key != rt.Key {
			continue
		}
		c.up = u
		if !u.reusable() {
			c.dropUpstream()
			break
		}
		u.hold()
		return u, nil
	}
	if len(c.ups) == maxPinned {
		c.up = c.ups[0]
		c.dropUpstream()
	}
	nc, err := rt.Dial(context.Background())
	if err != nil {
		return nil, err
	}
	r, direct := readerOf(nc)
	u := &upstream{nc: nc, key: rt.Key, r: r, direct: direct, w: httprule.Written{W: nc}}
	if !direct {
		u.probe = httprule.NewProber(nc)
	}
	u.hold()
	c.ups = append(c.ups, u)
	c.up = u
	return u, nil
}

// dropUpstream closes the current upstream connection.
func (c *conn) dropUpstream() {
	u := c.up
	if u == nil {
		return
	}
	c.up = nil
	for i, v := range c.ups {
		if v == u {
			c.ups = append(c.ups[:i], c.ups[i+1:]...)
			break
		}
	}
	_ = u.nc.Close()
	u.release()
}

// dropAll closes every pinned upstream connection.
func (c *conn) dropAll() {
	for len(c.ups) > 0 {
		c.up = c.ups[0]
		c.dropUpstream()
	}
}
