package streamframe

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
)

// Serve is the agent's end of a framed channel: it decodes each request
// the edge sends on c, runs h for it and writes the answer back as frames,
// one exchange after the other, until the channel closes or breaks the
// format. base is the parent of every request's context; prepare, if set,
// adds to each request's (the agent pins an upstream connection to the
// channel). Serve closes c.
func Serve(base context.Context, c net.Conn, h http.Handler, prepare func(context.Context) context.Context) {
	defer func() { _ = c.Close() }()
	s := &server{c: c, r: NewReader(bufio.NewReaderSize(c, 4<<10)), bw: bufio.NewWriterSize(c, 8<<10)}
	next := make(chan frame, 1)
	var f frame
	f.typ, f.p, f.err = s.r.Next()
	for f.err == nil && f.typ == TypeRequest {
		head, err := DecodeRequest(f.p)
		if err != nil {
			return
		}
		if !s.exchange(base, head, h, prepare, next) {
			return
		}
		f = <-next
	}
}

// frame is a frame read ahead by the watch of an exchange.
type frame struct {
	typ byte
	p   []byte
	err error
}

type server struct {
	c    net.Conn
	r    *Reader
	bw   *bufio.Writer
	hbuf []byte // the head being written
}

// exchange runs one request; it reports whether the channel may carry
// the next, which the watch then reads into next.
func (s *server) exchange(base context.Context, head *RequestHead, h http.Handler, prepare func(context.Context) context.Context, next chan frame) bool {
	ctx, cancel := context.WithCancel(base)
	defer cancel()
	if prepare != nil {
		ctx = prepare(ctx)
	}
	req, err := newRequest(ctx, head, s.c.RemoteAddr())
	if err != nil {
		return false
	}
	watch := func() {
		// The request has ended: what comes next is the channel's close
		// (a reset stream, which ends the handler's context) or, after
		// the answer, the next request.
		go func() {
			var f frame
			f.typ, f.p, f.err = s.r.Next()
			if f.err != nil {
				cancel()
			}
			next <- f
		}()
	}
	b := &body{r: s.r, left: head.ContentLength, trailer: req.Trailer, done: watch}
	if head.NoBody {
		watch()
	} else {
		req.Body = b
	}
	rw := &responseWriter{s: s, header: http.Header{}}
	if !serveHandler(h, rw, req) || !rw.finish() {
		return false
	}
	if !head.NoBody && !b.ended {
		// The handler left the body unread: the rest is dropped, and the
		// edge, whose answer is complete, closes the channel.
		if _, err := io.Copy(io.Discard, b); err != nil {
			return false
		}
	}
	return true
}

// newRequest is head as the agent's handler takes it: HTTP/2, from the
// public client's address.
func newRequest(ctx context.Context, head *RequestHead, remote net.Addr) (*http.Request, error) {
	u := &url.URL{Path: "*"}
	if head.Path != "*" {
		var err error
		if u, err = url.ParseRequestURI(head.Path); err != nil {
			return nil, err
		}
	}
	req := &http.Request{
		Method: head.Method, URL: u, Proto: "HTTP/2.0", ProtoMajor: 2,
		Header: head.Header, Host: head.Authority, RequestURI: head.Path,
		ContentLength: head.ContentLength, Body: http.NoBody,
	}
	if remote != nil {
		req.RemoteAddr = remote.String()
	}
	if len(head.Trailer) > 0 {
		req.Trailer = http.Header{}
		for _, name := range head.Trailer {
			req.Trailer[http.CanonicalHeaderKey(name)] = nil
		}
	}
	return req.WithContext(ctx), nil
}

// body reads a request's data frames up to its end frame, whose
// trailers it fills in; a body that breaks its declared length is an
// error, never a shorter or longer request.
type body struct {
	r       *Reader
	left    int64 // of the declared length; -1: none declared
	trailer http.Header
	ended   bool
	err     error
	done    func()
}

func (b *body) Read(p []byte) (int, error) {
	for b.err == nil {
		n, err := b.r.ReadData(p)
		if n > 0 {
			if b.left >= 0 {
				if b.left -= int64(n); b.left < 0 {
					b.err = frameErr("a body longer than its length")
					return 0, b.err
				}
			}
			return n, nil
		}
		if !errors.Is(err, io.EOF) {
			b.err = err
			break
		}
		typ, payload, err := b.r.Next()
		switch {
		case err != nil:
			// The channel closed before the body's end: the stream was
			// reset, and the body is cut short, never whole.
			b.err = noEOF(err)
		case typ == TypeData:
		case typ == TypeEnd:
			b.err = b.end(payload)
		default:
			b.err = frameErr("frame type %d in a request body", typ)
		}
	}
	return 0, b.err
}

// end takes the end frame: io.EOF when the body is whole.
func (b *body) end(payload []byte) error {
	t, err := DecodeEnd(payload)
	if err != nil {
		return err
	}
	if b.left > 0 {
		return frameErr("a body shorter than its length")
	}
	for k, vv := range t {
		if b.trailer != nil {
			b.trailer[k] = vv
		}
	}
	b.ended = true
	b.done()
	return io.EOF
}

func (b *body) Close() error { return nil }

// serveHandler runs h; a handler that panics (ReverseProxy does, with
// http.ErrAbortHandler, when an answer breaks off) ends the exchange
// with the channel, so the edge resets the client's stream, as net/http
// closes the connection of a handler that panicked.
func serveHandler(h http.Handler, w http.ResponseWriter, r *http.Request) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	h.ServeHTTP(w, r)
	return true
}
