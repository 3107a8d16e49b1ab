package httpfwd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"code.tuna.am/tuna/k8s-operator/internal/bufpool"
	"code.tuna.am/tuna/k8s-operator/internal/httprule"
)

// Dial opens a new outbound connection.
type Dial func(ctx context.Context) (net.Conn, error)

// Forward sends out (made by Outgoing from the inbound request) on an idle
// connection of idle opened for key, or on a new one from dial, and copies
// the answer to w. modify, if not nil, may change the answer before it is
// copied. The error is for the caller to answer (502, 503): Forward returns
// one only when it has written nothing. A request that may be replayed
// (Replayable) is sent again on a new connection when its connection
// closes before any answer: a draining agent closes its idle channels, and
// a backend its idle keep-alives, at any time.
func Forward(w http.ResponseWriter, out *http.Request, idle *Idle, key string, dial Dial, modify func(*http.Response)) error {
	ctx := out.Context()
	for attempt := 0; ; attempt++ {
		u, err := open(ctx, idle, key, dial)
		if err != nil {
			return err
		}
		// A client that goes away ends the exchange, as it would end
		// http.Transport's: the connection closes and its peer sees it.
		stop := context.AfterFunc(ctx, func() { _ = u.c.Close() })
		resp, werr, err := exchange(u, out) //nolint:bodyclose // answer closes it
		if err != nil {
			stop()
			u.Close()
			if out.Body == nil && ctx.Err() == nil && httprule.Replay(u.w.N, err, attempt+1) {
				continue
			}
			return err
		}
		if modify != nil {
			modify(resp)
		}
		complete := answer(w, resp)
		if stop() && werr() == nil && httprule.Reusable(complete, resp.Close, u.br.Buffered()) {
			idle.put(u)
			return nil
		}
		_ = werr()
		u.Close()
		return nil
	}
}

// open returns an idle connection for key that may carry the request,
// or a new one.
func open(ctx context.Context, idle *Idle, key string, dial Dial) (*Conn, error) {
	for {
		u := idle.take(key)
		if u == nil {
			break
		}
		if u.reusable() {
			u.w.Reset()
			return u, nil
		}
		u.Close()
	}
	c, err := dial(ctx)
	if err != nil {
		return nil, err
	}
	return NewConn(c, key), nil
}

// exchange writes out on u and reads the answer's head. A request with a
// body is written beside the read, as http.Transport does, so a peer that
// answers before it has read the whole body is not deadlocked; werr waits
// for that write. 1xx heads are dropped: the inbound server answers a
// client's Expect: 100-continue itself when the body is read.
func exchange(u *Conn, out *http.Request) (resp *http.Response, werr func() error, err error) {
	if out.Body == nil {
		if err := writeRequest(u, out); err != nil {
			return nil, nil, err
		}
		werr = func() error { return nil }
	} else {
		// A body the client breaks or leaves mid-way ends the exchange at
		// once: the upstream would otherwise wait for the rest of it, and
		// this side for its answer, for ever.
		body := &bodyReader{ReadCloser: out.Body}
		out.Body = body
		done := make(chan error, 1)
		go func() {
			err := writeRequest(u, out)
			if body.err != nil {
				_ = u.c.Close()
				err = fmt.Errorf("%w: %w", ErrRequestBody, body.err)
			}
			done <- err
		}()
		var once sync.Once
		var e error
		werr = func() error {
			once.Do(func() {
				select {
				case e = <-done:
				default:
					if body.eof.Load() {
						// All of the body was read: only its end (a
						// flush, the last chunk) is left to write, which
						// the upstream that answered takes.
						e = <-done
						return
					}
					// The answer is complete while the body is still being
					// sent: the connection cannot be reused; closing it
					// ends the write.
					_ = u.c.Close()
					if e = <-done; e == nil {
						e = errors.New("request body unfinished")
					}
				}
			})
			return e
		}
	}
	for {
		resp, err = http.ReadResponse(u.br, out)
		if err != nil {
			_ = u.c.Close()
			if werr := werr(); errors.Is(werr, ErrRequestBody) {
				return nil, nil, werr
			}
			return nil, nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		_ = u.c.Close()
		_ = werr()
		return nil, nil, errors.New("the peer switched protocols on a request that asked for no upgrade")
	}
	return resp, werr, nil
}

// ErrRequestBody is an exchange ended by its request body: the client
// broke its framing, stalled past a deadline, or left mid-way.
var ErrRequestBody = errors.New("reading the request body")

// bodyReader records a request body's read error, and its end.
type bodyReader struct {
	io.ReadCloser
	err error
	eof atomic.Bool
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

func writeRequest(u *Conn, out *http.Request) error {
	if err := out.Write(u.bw); err != nil {
		return err
	}
	return u.bw.Flush()
}

// answer copies resp to w; it reports whether the whole body was read, so
// the connection may carry the next request.
func answer(w http.ResponseWriter, resp *http.Response) bool {
	defer func() { _ = resp.Body.Close() }()
	RemoveHopHeaders(resp.Header)
	dst := w.Header()
	for k, v := range resp.Header {
		dst[k] = v
	}
	for k := range resp.Trailer {
		if !httprule.TrailerAllowed(k) {
			delete(resp.Trailer, k)
		}
	}
	announced := len(resp.Trailer)
	if announced > 0 {
		keys := make([]string, 0, announced)
		for k := range resp.Trailer {
			keys = append(keys, k)
		}
		dst.Add("Trailer", strings.Join(keys, ", "))
	}
	WriteHead(w, resp.StatusCode, resp.ContentLength)
	if complete, err := copyBody(w, resp.Body, resp.ContentLength); err != nil || !complete {
		return false
	}
	if len(resp.Trailer) > 0 {
		// Trailers go out only after a flush has sent the body chunked.
		_ = http.NewResponseController(w).Flush()
		prefix := ""
		if len(resp.Trailer) != announced {
			prefix = http.TrailerPrefix
		}
		for k, vv := range resp.Trailer {
			if !httprule.TrailerAllowed(k) {
				continue // one the answer did not announce
			}
			for _, v := range vv {
				dst.Add(prefix+k, v)
			}
		}
	}
	return true
}

// WriteHead writes an answer's status line and head. The head of a
// streamed answer (length < 0: chunked, or until the connection closes)
// goes out at once, as its upstream sent it: the client may wait for it
// before it sends more of a full-duplex request body (a bidi gRPC call
// whose server sends its headers first, an upload echoed as it comes),
// or show a stream open (an event source) long before the first piece of
// the body comes. Servers hold a head back until the first body write;
// an answer of declared length keeps that, its body follows at once.
func WriteHead(w http.ResponseWriter, code int, length int64) {
	w.WriteHeader(code)
	if length < 0 && code >= http.StatusOK {
		_ = http.NewResponseController(w).Flush()
	}
}

// copyBody copies an answer's body, flushing each piece at once so that
// streams (server-sent events, long polls) never wait for a buffer; a body
// whose declared length is all written needs no flush, the server sends it
// when the handler returns.
func copyBody(w http.ResponseWriter, body io.Reader, length int64) (bool, error) {
	buf := bufpool.Shared.Get()
	defer bufpool.Shared.Put(buf)
	rc := http.NewResponseController(w)
	var written int64
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return false, err
			}
			written += int64(n)
			if length < 0 || written < length {
				if err := rc.Flush(); err != nil {
					return false, err
				}
			}
		}
		if rerr == io.EOF {
			return true, nil
		}
		if rerr != nil {
			return false, fmt.Errorf("reading the answer: %w", rerr)
		}
	}
}
