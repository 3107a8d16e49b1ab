package h2serve

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"code.tuna.am/tuna/k8s-operator/internal/httprule"
)

// bufSize is how much of an answer's body waits for more before it is
// sent as DATA, as net/http's HTTP/2 server keeps per stream.
const bufSize = 16 << 10

// responseWriter is a stream's http.ResponseWriter. Its HEADERS and DATA
// are written by the handler's goroutine into the connection's buffer:
// no goroutine per frame.
type responseWriter struct {
	st          *stream
	c           *conn
	head        bool // a HEAD request: no body is sent
	hdr         http.Header
	status      int
	wroteHeader bool
	sentHeader  bool
	buf         []byte
	written     int64
	declared    int64 // the answer's content-length, -1 when not declared
}

func (w *responseWriter) Header() http.Header { return w.hdr }

func (w *responseWriter) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	if code < 100 || code > 999 {
		panic("h2serve: invalid status " + strconv.Itoa(code))
	}
	if code < 200 {
		// An informational answer goes out at once; the final one follows.
		c := w.c
		c.mu.Lock()
		if w.st.writableLocked() == nil {
			c.writeHeadersLocked(w.st.id, w.fields(code), false)
		}
		c.mu.Unlock()
		c.flushAsync()
		return
	}
	w.wroteHeader, w.status = true, code
	w.declared = -1
	if v := w.hdr.Get("Content-Length"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			w.declared = n
		}
	}
}

// bodyAllowed: the answer may have a body (RFC 9110 section 6.4.1).
func (w *responseWriter) bodyAllowed() bool {
	return w.status != http.StatusNoContent && w.status != http.StatusNotModified
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.bodyAllowed() {
		return 0, http.ErrBodyNotAllowed
	}
	if w.declared >= 0 && w.written+int64(len(p)) > w.declared {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	if w.head {
		return len(p), nil
	}
	if len(w.buf)+len(p) <= bufSize {
		w.buf = append(w.buf, p...)
		return len(p), nil
	}
	if err := w.send(false); err != nil {
		return 0, err
	}
	if len(p) <= bufSize {
		w.buf = append(w.buf, p...)
		return len(p), nil
	}
	if err := w.c.writeData(w.st, p, false); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *responseWriter) WriteString(s string) (int, error) { return w.Write([]byte(s)) }

// Flush sends the head and what is buffered. An answer whose declared
// length is all written waits for its end instead (the handler's
// return, at once after): HEADERS and DATA then go out in one write,
// with END_STREAM.
func (w *responseWriter) Flush() { _ = w.FlushError() }

func (w *responseWriter) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.declared >= 0 && w.written == w.declared {
		return nil
	}
	return w.send(false)
}

// send writes the head if it is not out, and the buffered body; end ends
// the stream with them.
func (w *responseWriter) send(end bool) error {
	c := w.c
	if !w.sentHeader {
		c.mu.Lock()
		if err := c.roomLocked(w.st); err != nil {
			c.mu.Unlock()
			return err
		}
		w.sentHeader = true
		headEnd := end && len(w.buf) == 0
		c.writeHeadersLocked(w.st.id, w.fields(w.status), headEnd)
		if headEnd {
			w.st.sentEnd = true
		}
		if len(w.buf) == 0 {
			start := c.startFlushLocked()
			c.mu.Unlock()
			if start {
				c.flush()
			}
			return nil
		}
		c.mu.Unlock()
	}
	if len(w.buf) == 0 && !end {
		return nil
	}
	err := c.writeData(w.st, w.buf, end)
	w.buf = w.buf[:0]
	return err
}

// fields is the head of an answer of status code: the fields that may
// go in an HTTP/2 message, names in lower case.
func (w *responseWriter) fields(code int) []hpack.HeaderField {
	f := make([]hpack.HeaderField, 0, 1+len(w.hdr))
	f = append(f, hpack.HeaderField{Name: ":status", Value: strconv.Itoa(code)})
	for k, vv := range w.hdr {
		if strings.HasPrefix(k, http.TrailerPrefix) || !allowedOut(k) {
			continue
		}
		name := strings.ToLower(k)
		for _, v := range vv {
			if httpguts.ValidHeaderFieldValue(v) {
				f = append(f, hpack.HeaderField{Name: name, Value: v})
			}
		}
	}
	return f
}

// allowedOut: a field an HTTP/2 answer may carry.
func allowedOut(k string) bool {
	return httpguts.ValidHeaderFieldName(k) && !httprule.H2Refused(k) && !strings.EqualFold(k, "te")
}

// trailers are the answer's trailer fields: those its Trailer field
// announced and those set under http.TrailerPrefix.
func (w *responseWriter) trailers() []hpack.HeaderField {
	var f []hpack.HeaderField
	add := func(name string, vv []string) {
		if !allowedOut(name) || !httprule.TrailerAllowed(name) {
			return
		}
		for _, v := range vv {
			if httpguts.ValidHeaderFieldValue(v) {
				f = append(f, hpack.HeaderField{Name: strings.ToLower(name), Value: v})
			}
		}
	}
	for _, v := range w.hdr["Trailer"] {
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				add(name, w.hdr.Values(name))
			}
		}
	}
	for k, vv := range w.hdr {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			add(name, vv)
		}
	}
	return f
}

// finish ends the answer after the handler returned.
func (w *responseWriter) finish() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	trailers := w.trailers()
	if !w.sentHeader && w.declared < 0 && len(trailers) == 0 && w.bodyAllowed() && !w.head {
		// The whole body is known: say its length, as net/http does.
		w.hdr.Set("Content-Length", strconv.Itoa(len(w.buf)))
	}
	if len(trailers) == 0 {
		return w.send(true)
	}
	if err := w.send(false); err != nil {
		return err
	}
	c := w.c
	c.mu.Lock()
	if err := c.roomLocked(w.st); err != nil {
		c.mu.Unlock()
		return err
	}
	c.writeHeadersLocked(w.st.id, trailers, true)
	w.st.sentEnd = true
	start := c.startFlushLocked()
	c.mu.Unlock()
	if start {
		c.flush()
	}
	return nil
}

// SetReadDeadline bounds each wait for more of the request body.
func (w *responseWriter) SetReadDeadline(t time.Time) error {
	if b := w.st.body; b != nil {
		b.setDeadline(t)
	}
	return nil
}

// SetWriteDeadline is accepted for the edge's own answers, which are
// short; writes are bounded by WriteTimeout and StallTimeout.
func (w *responseWriter) SetWriteDeadline(time.Time) error { return nil }

// EnableFullDuplex: HTTP/2 always is.
func (w *responseWriter) EnableFullDuplex() error { return nil }

// run serves one stream with h, then ends it.
func (c *conn) run(st *stream, req *http.Request, h http.Handler) {
	w := &responseWriter{st: st, c: c, head: req.Method == http.MethodHead, hdr: http.Header{}, declared: -1}
	aborted := true
	func() {
		defer func() {
			if p := recover(); p != nil && !isAbort(p) {
				c.s.log().Error("h2: handler panicked", "remote", c.remote, "panic", p)
			}
		}()
		h.ServeHTTP(w, req)
		aborted = false
	}()
	if !aborted {
		aborted = w.finish() != nil
	}
	c.mu.Lock()
	st.handlerDone = true
	code, reset := http2.ErrCodeNo, false
	switch {
	case aborted && !st.sentEnd && st.err == nil:
		code, reset = http2.ErrCodeInternal, true
	case st.body != nil && !st.body.ended && !st.resetSent && st.err == nil:
		// The answer ended before the request: the client may stop
		// sending (RFC 9113 section 8.1).
		reset = true
	}
	if reset && c.werr == nil {
		c.queueResetLocked(st.id, code)
	}
	if b := st.body; b != nil {
		c.giveBackLocked(nil, int64(len(b.buf)-b.r))
		b.buf, b.closed = nil, true
	}
	st.resetLocked(errStreamDone)
	delete(c.streams, st.id)
	c.running--
	c.lastActive = time.Now()
	closeNow := c.goingAway && c.running == 0 && len(c.streams) == 0
	start := c.startFlushLocked()
	c.mu.Unlock()
	if start {
		c.flush()
	}
	if closeNow {
		c.flushSync()
		_ = c.nc.Close()
	}
}

// isAbort: a handler's panic that means only "reset the stream".
func isAbort(p any) bool {
	err, ok := p.(error)
	return ok && errors.Is(err, http.ErrAbortHandler)
}

var errStreamDone = errors.New("h2serve: stream done")
