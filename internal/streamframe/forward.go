package streamframe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"code.tuna.am/tuna/k8s-operator/internal/bufpool"
	"code.tuna.am/tuna/k8s-operator/internal/httpfwd"
	"code.tuna.am/tuna/k8s-operator/internal/httprule"
)

// Conn is the edge's end of a framed channel, kept across its exchanges.
type Conn struct {
	c   net.Conn
	r   *Reader
	buf []byte // the head being written
}

// NewConn wraps a channel whose agent serves frames.
func NewConn(c net.Conn) *Conn {
	return &Conn{c: c, r: NewReader(bufio.NewReaderSize(c, 4<<10))}
}

// Close closes the channel.
func (c *Conn) Close() error { return c.c.Close() }

// Lease is the channel's httprule.Lease, nil when it has none.
func (c *Conn) Lease() httprule.Lease { return httprule.LeaseOf(c.c) }

// Forward sends out (the request as the next hop gets it, hop-by-hop
// fields removed) on c and copies the answer into w. It returns an error
// only when nothing was written to w, for the caller to answer (502); an
// answer that breaks off after its head resets the stream
// (http.ErrAbortHandler). reusable says c may carry the next exchange.
func Forward(w http.ResponseWriter, out *http.Request, c *Conn) (reusable bool, err error) {
	ctx := out.Context()
	// A reset stream, or a client gone, closes the channel: the agent's
	// handler sees its request end.
	stop := context.AfterFunc(ctx, func() { _ = c.c.Close() })
	sent, err := c.send(out)
	if err != nil {
		stop()
		_ = c.c.Close()
		return false, err
	}
	head, err := c.readHead()
	if err != nil {
		stop()
		_ = c.c.Close()
		if berr := sent(); errors.Is(berr, httpfwd.ErrRequestBody) {
			return false, berr
		}
		return false, err
	}
	complete := c.answer(w, head)
	if !stop() || !complete {
		_ = c.c.Close()
		_ = sent()
		if !complete {
			panic(http.ErrAbortHandler)
		}
		return false, nil
	}
	return sent() == nil, nil
}

// notSent is a request of which nothing reached the channel: it closed
// before the head (a kept channel of a session that just ended).
type notSent struct{ err error }

func (e notSent) Error() string { return e.err.Error() }
func (e notSent) Unwrap() error { return e.err }

// NotSent reports whether Forward failed before any of the request was
// written, so that it may be sent again on another channel
// (httprule.Replay), with its body, which Forward has not read.
func NotSent(err error) bool {
	var ns notSent
	return errors.As(err, &ns)
}

// send writes out's head, and its body beside the answer's read: a peer
// may answer before the body ends (a bidi stream's first answer, an
// upload refused early). done waits for the body; an answer that is
// complete while the body still flows ends it by closing the channel.
func (c *Conn) send(out *http.Request) (done func() error, err error) {
	head := RequestHead{Method: out.Method, Authority: out.Host, Path: out.URL.RequestURI(),
		ContentLength: out.ContentLength, Header: out.Header, NoBody: out.Body == nil || out.Body == http.NoBody}
	if head.NoBody {
		head.ContentLength = 0
	}
	// The head's authority is the target: a Host field beside it (an
	// HTTP/2 client may send one) is not passed on, as HTTP/1.1's writer
	// writes the Host of the request, not the field.
	delete(out.Header, "Host")
	for name := range out.Trailer {
		if validTrailer(name) {
			head.Trailer = append(head.Trailer, name)
		}
	}
	if c.buf, err = AppendRequest(c.buf[:0], &head); err != nil {
		return nil, err
	}
	if n, err := c.c.Write(c.buf); err != nil {
		if httprule.Replay(int64(n), err, 1) {
			return nil, notSent{err}
		}
		return nil, err
	}
	if head.NoBody {
		return func() error { return nil }, nil
	}
	result := make(chan error, 1)
	var read atomic.Bool // the client's body is all read: only its end is left to write
	go func() { result <- c.sendBody(out, &read) }()
	var once sync.Once
	var berr error
	return func() error {
		once.Do(func() {
			select {
			case berr = <-result:
			default:
				if read.Load() {
					// The agent reads every frame up to the end.
					berr = <-result
					return
				}
				// Closing the body ends a read that waits for the
				// client; closing the channel, a write that waits for
				// the agent.
				_ = out.Body.Close()
				_ = c.c.Close()
				if berr = <-result; berr == nil {
					berr = errors.New("request body unfinished")
				}
			}
		})
		return berr
	}, nil
}

// sendBody copies out's body as data frames, each sent as it is read,
// then the end frame with out's trailers.
func (c *Conn) sendBody(out *http.Request, read *atomic.Bool) error {
	pb := getDataBuffer()
	defer putDataBuffer(pb)
	buf := *pb
	for {
		n, err := out.Body.Read(buf.Payload())
		if n > 0 {
			if werr := WriteDataIn(c.c, buf, n); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			read.Store(true)
			break
		}
		if err != nil {
			_ = c.c.Close()
			return fmt.Errorf("%w: %w", httpfwd.ErrRequestBody, err)
		}
	}
	_, err := c.c.Write(AppendEnd(nil, out.Trailer))
	return err
}

func (c *Conn) readHead() (*ResponseHead, error) {
	typ, p, err := c.r.Next()
	if err != nil {
		return nil, err
	}
	if typ != TypeResponse {
		return nil, frameErr("frame type %d for a response head", typ)
	}
	return DecodeResponse(p)
}

// answer writes the head and copies the body and trailers into w; it
// reports whether the whole answer came.
func (c *Conn) answer(w http.ResponseWriter, head *ResponseHead) bool {
	dst := w.Header()
	for k, vv := range head.Header {
		dst[k] = vv
	}
	if head.ContentLength >= 0 {
		dst.Set("Content-Length", strconv.FormatInt(head.ContentLength, 10))
	}
	w.WriteHeader(head.Status)
	rc := http.NewResponseController(w)
	if head.NoBody {
		return true
	}
	if head.ContentLength < 0 {
		// A streamed answer's head goes out at once (an event stream, a
		// bidi call whose client waits for it).
		if rc.Flush() != nil {
			return false
		}
	}
	buf := bufpool.Shared.Get()
	defer bufpool.Shared.Put(buf)
	for {
		typ, p, err := c.r.Next()
		if err != nil {
			return false
		}
		switch typ {
		case TypeData:
			if !c.copyData(w, rc, buf) {
				return false
			}
		case TypeEnd:
			t, err := DecodeEnd(p)
			if err != nil {
				return false
			}
			for k, vv := range t {
				for _, v := range vv {
					dst.Add(http.TrailerPrefix+k, v)
				}
			}
			return true
		default:
			return false
		}
	}
}

// copyData copies one data frame into w, flushing once nothing more has
// arrived: a stream's piece never waits for the next one.
func (c *Conn) copyData(w http.ResponseWriter, rc *http.ResponseController, buf []byte) bool {
	for {
		n, err := c.r.ReadData(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return false
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return false
		}
	}
	if c.r.Buffered() == 0 {
		return rc.Flush() == nil
	}
	return true
}
