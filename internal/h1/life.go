package h1

import (
	"errors"
	"net"
	"sync"
	"time"
)

// life is what may end an exchange from outside the goroutine that runs
// it: the client leaving, its body breaking the framing, the exchange's
// deadline. Ending it closes the exchange's upstream connection, which
// ends whatever waits on it, at once.
type life struct {
	mu sync.Mutex
	// live: an exchange runs; up is its upstream connection once chosen.
	live bool
	up   net.Conn
	// answering: the answer's head has gone to the client.
	answering bool
	why       error
	timer     *time.Timer
	// watchTimer starts the watch of the client (watchSoon); armed says
	// the exchange's request has been read whole, so a watch may start (a
	// timer of an earlier exchange that fires late finds it false).
	watchTimer *time.Timer
	armed      bool
}

// Why an exchange was ended from outside.
var (
	errClientGone  = errors.New("the client left before its answer")
	errBadBody     = errors.New("the request body breaks its framing")
	errExchangeDue = errors.New("the exchange took longer than its deadline")
)

// begin starts an exchange's life, with its deadline if one is set.
func (c *conn) begin() {
	x := &c.x
	x.mu.Lock()
	x.live, x.up, x.answering, x.why, x.armed = true, nil, false, nil, false
	x.mu.Unlock()
	if d := c.s.ExchangeTimeout; d > 0 {
		if x.timer == nil {
			x.timer = time.AfterFunc(d, func() { c.end(errExchangeDue) })
		} else {
			x.timer.Reset(d)
		}
	}
}

// use makes up the exchange's upstream; it fails when the exchange has
// already been ended.
func (c *conn) use(up net.Conn) error {
	x := &c.x
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.why != nil {
		return x.why
	}
	x.up = up
	return nil
}

// answering records that the answer's head is about to go out: from then
// on an exchange that is ended can only be cut, not answered.
func (c *conn) answering() error {
	x := &c.x
	x.mu.Lock()
	defer x.mu.Unlock()
	x.answering = true
	return x.why
}

// end ends the exchange in progress, if any, for why: its upstream
// connection is closed, and a client that is being answered (or has left)
// is cut off too.
func (c *conn) end(why error) {
	x := &c.x
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.live || x.why != nil {
		return
	}
	x.why = why
	if x.up != nil {
		_ = x.up.Close()
	}
	if x.answering || errors.Is(why, errClientGone) {
		_ = c.nc.SetWriteDeadline(time.Now())
		if c.direct != nil {
			_ = c.nc.Close() // no deadline reaches a direct reader's writes
		}
	}
}

// finish ends the exchange's life; it returns why it was ended from
// outside, if it was.
func (c *conn) finish() error {
	x := &c.x
	if x.timer != nil {
		x.timer.Stop()
	}
	x.mu.Lock()
	if x.watchTimer != nil {
		x.watchTimer.Stop()
	}
	x.armed = false
	defer x.mu.Unlock()
	x.live, x.up = false, nil
	return x.why
}

// ended is why the exchange was ended from outside, or nil.
func (c *conn) ended() error {
	x := &c.x
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.why
}

// watchAfter is how long an exchange waits for its answer before the
// relay starts watching its client. Almost every exchange ends sooner and
// never pays for the watch (a goroutine and its wake-ups); a long poll
// whose client leaves is noticed this much later.
const watchAfter = 50 * time.Millisecond

// watchSoon arms the watch of the client once its request has been read
// whole: if the exchange still runs after watchAfter, watchClient starts.
func (c *conn) watchSoon() {
	x := &c.x
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.live {
		return
	}
	x.armed = true
	if x.watchTimer == nil {
		x.watchTimer = time.AfterFunc(watchAfter, c.watchLate)
	} else {
		x.watchTimer.Reset(watchAfter)
	}
}

// watchLate starts the watch for an exchange that still runs.
func (c *conn) watchLate() {
	x := &c.x
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.live && x.armed && x.why == nil && c.watch == nil {
		c.watchClient()
	}
}

// watchClient waits, in the background, for the client's next byte. A
// client that leaves (an end, a reset) while its answer is awaited ends
// the exchange, so the upstream stops working for nobody, as net/http's
// background read does. Bytes that come instead (a pipelined request) stay
// in the reader for readRequest, which takes the watch's result. Nothing
// else reads the client's reader until then: the request is read whole.
// c.x.mu is held.
func (c *conn) watchClient() {
	w := make(chan peeked, 1)
	c.watch = w
	go func() {
		_, err := c.br.Peek(1)
		if err != nil {
			c.end(errClientGone)
		}
		w <- peeked{err}
	}()
}
