package h2serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"code.tuna.am/tuna/k8s-operator/internal/httprule"
)

var (
	errStreamReset    = errors.New("h2serve: stream reset by the client")
	errStreamFlow     = errors.New("h2serve: stream flow-control window overflowed")
	errStreamProtocol = errors.New("h2serve: stream broke the protocol")
)

// stream is one request and its answer. Its fields are under c.mu.
type stream struct {
	c      *conn
	id     uint32
	ctx    context.Context
	cancel context.CancelFunc
	req    *http.Request // for trailers
	body   *body         // nil: the request ended with its head
	// sendWindow is what the client lets the server send on the stream.
	sendWindow  int64
	handlerDone bool
	sentEnd     bool // END_STREAM or RST_STREAM sent: nothing more is
	resetSent   bool
	err         error // why the stream was reset; writes fail with it
}

// resetLocked ends the stream: its handler's context, body reads and
// writes see err.
func (st *stream) resetLocked(err error) {
	if st.err == nil {
		st.err = err
	}
	if b := st.body; b != nil && b.err == nil && !b.ended {
		b.err = err
		b.notifyLocked()
	}
	st.cancel()
	st.c.cond.Broadcast()
}

// writableLocked is why nothing more may be written on st, or nil.
func (st *stream) writableLocked() error {
	if st.c.werr != nil {
		return st.c.werr
	}
	return st.err
}

// readBlock gathers a header block: f's fragment and its CONTINUATION
// frames, within ReadHeaderTimeout, up to the header list limit and
// maxContinuations frames.
func (c *conn) readBlock(f *http2.HeadersFrame) ([]byte, error) {
	limit := int(c.s.maxHeaderList())
	block := append([]byte(nil), f.HeaderBlockFragment()...)
	if f.HeadersEnded() {
		return block, nil
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(orDefault(c.s.ReadHeaderTimeout)))
	defer func() { _ = c.nc.SetReadDeadline(time.Time{}) }()
	for n := 0; ; n++ {
		if n >= maxContinuations {
			return nil, connError{http2.ErrCodeEnhanceYourCalm, "too many CONTINUATION frames"}
		}
		next, err := c.fr.ReadFrame()
		if err != nil {
			return nil, err
		}
		cf, ok := next.(*http2.ContinuationFrame)
		if !ok || cf.StreamID != f.StreamID {
			return nil, connError{http2.ErrCodeProtocol, "a header block interrupted"}
		}
		block = append(block, cf.HeaderBlockFragment()...)
		if len(block) > limit {
			// The block cannot be decoded without keeping all of it: the
			// connection's header table is lost with it.
			return nil, connError{http2.ErrCodeEnhanceYourCalm, "header block over the limit"}
		}
		if cf.HeadersEnded() {
			return block, nil
		}
	}
}

// decode decodes a block; tooLarge: the fields exceed the header list
// limit (their decoding went on, to keep the header table in step).
func (c *conn) decode(block []byte) (fields []hpack.HeaderField, tooLarge bool, err error) {
	limit, size := c.s.maxHeaderList(), uint32(0)
	c.hdec.SetEmitFunc(func(hf hpack.HeaderField) {
		size += hf.Size()
		if size > limit {
			tooLarge = true
			return
		}
		fields = append(fields, hf)
	})
	defer c.hdec.SetEmitFunc(func(hpack.HeaderField) {})
	if _, err := c.hdec.Write(block); err != nil {
		return nil, false, connError{http2.ErrCodeCompression, err.Error()}
	}
	if err := c.hdec.Close(); err != nil {
		return nil, false, connError{http2.ErrCodeCompression, err.Error()}
	}
	return fields, tooLarge, nil
}

// headers takes a new stream, or the trailers of one.
func (c *conn) headers(f *http2.HeadersFrame) error {
	id, end := f.StreamID, f.StreamEnded()
	block, err := c.readBlock(f)
	if err != nil {
		return err
	}
	fields, tooLarge, err := c.decode(block)
	if err != nil {
		return err
	}
	if id%2 == 0 {
		return connError{http2.ErrCodeProtocol, "an even stream id from a client"}
	}
	c.mu.Lock()
	if st := c.streams[id]; st != nil {
		c.mu.Unlock()
		return c.trailers(st, fields, end, tooLarge)
	}
	if id <= c.lastID {
		// A stream that ended (or that the server reset): what the
		// client sent before it knew is ignored (RFC 9113 section 5.1).
		c.mu.Unlock()
		return nil
	}
	c.lastID = id
	refuse := c.goingAway || c.running >= c.s.maxStreams()
	c.mu.Unlock()
	if refuse {
		// Safe to retry on another connection (RFC 9113 section 8.7); a
		// client that keeps opening past the limit spends the budget.
		if !c.budget.take(time.Now()) {
			return connError{http2.ErrCodeEnhanceYourCalm, "too many streams refused"}
		}
		return c.refuse(id, http2.ErrCodeRefusedStream)
	}
	req, declared, refusal, ok := c.request(fields, end)
	if !ok {
		if !c.budget.take(time.Now()) {
			return connError{http2.ErrCodeEnhanceYourCalm, "too many malformed streams"}
		}
		return c.refuse(id, http2.ErrCodeProtocol)
	}
	st := &stream{c: c, id: id, req: req}
	st.ctx, st.cancel = context.WithCancel(c.ctx)
	c.mu.Lock()
	st.sendWindow = c.peerInitWindow
	if !end {
		st.body = &body{st: st, window: streamWindow, declared: declared, notify: make(chan struct{}, 1)}
		req.Body = st.body
	}
	c.streams[id] = st
	c.running++
	c.mu.Unlock()
	h := c.s.Handler
	switch {
	case tooLarge:
		h = http.HandlerFunc(headerTooLarge)
	case refusal != "":
		h = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, refusal, http.StatusBadRequest) })
	case req.Method == http.MethodOptions && req.RequestURI == "*":
		// As net/http's servers: about the server, answered here.
		h = http.HandlerFunc(globalOptions)
	}
	if tooLarge || refusal != "" {
		if !c.budget.take(time.Now()) {
			return connError{http2.ErrCodeEnhanceYourCalm, "too many malformed streams"}
		}
	}
	go c.run(st, req.WithContext(st.ctx), h)
	return nil
}

func globalOptions(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Length", "0")
}

func headerTooLarge(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, "request header fields too large", http.StatusRequestHeaderFieldsTooLarge)
}

// refuse resets a stream the server does not take.
func (c *conn) refuse(id uint32, code http2.ErrCode) error {
	return c.control(func() { c.queueResetLocked(id, code) })
}

// trailers ends st's body with its trailer fields.
func (c *conn) trailers(st *stream, fields []hpack.HeaderField, end, tooLarge bool) error {
	c.mu.Lock()
	b := st.body
	if b == nil || b.ended {
		c.mu.Unlock()
		return connError{http2.ErrCodeStreamClosed, "HEADERS after the end of a stream"}
	}
	c.mu.Unlock()
	if !end || tooLarge {
		return c.streamError(st.id, http2.ErrCodeProtocol)
	}
	t := http.Header{}
	for _, f := range fields {
		if strings.HasPrefix(f.Name, ":") || !validField(f) || refused(f) != "" {
			return c.streamError(st.id, http2.ErrCodeProtocol)
		}
		k := http.CanonicalHeaderKey(f.Name)
		t[k] = append(t[k], f.Value)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// As net/http's server: trailers reach the handler only when the
	// request declared some; they are copied into its Trailer when its
	// body read ends, on its own goroutine.
	if st.req.Trailer != nil {
		b.trailer = t
	}
	b.endLocked()
	return nil
}

func validField(f hpack.HeaderField) bool {
	return httpguts.ValidHeaderFieldName(f.Name) && strings.ToLower(f.Name) == f.Name && httpguts.ValidHeaderFieldValue(f.Value)
}

// refused is why a well-formed field makes a request malformed in
// HTTP/2 (RFC 9113 section 8.2.2), in net/http's words: the client gets
// them in a 400 answer, as from net/http's server; "" when it does not.
func refused(f hpack.HeaderField) string {
	switch {
	case httprule.H2Refused(f.Name):
		return fmt.Sprintf("request header %q is not valid in HTTP/2", http.CanonicalHeaderKey(f.Name))
	case f.Name == "te" && httprule.H2RefusedTE(f.Value):
		return `request header "TE" may only be "trailers" in HTTP/2`
	}
	return ""
}

// request builds a stream's request from its fields, as net/http's
// HTTP/2 server does, or reports it malformed (RFC 9113 section 8.1.1):
// not ok (a reset), or a refusal to answer with 400.
func (c *conn) request(fields []hpack.HeaderField, end bool) (req *http.Request, declared int64, refusal string, ok bool) {
	var method, scheme, authority, path string
	hdr := make(http.Header, len(fields))
	regular := false
	var cookies []string
	for _, f := range fields {
		if strings.HasPrefix(f.Name, ":") {
			if regular {
				return nil, 0, "", false
			}
			var p *string
			switch f.Name {
			case ":method":
				p = &method
			case ":scheme":
				p = &scheme
			case ":authority":
				p = &authority
			case ":path":
				p = &path
			default:
				return nil, 0, "", false
			}
			if *p != "" || f.Value == "" {
				return nil, 0, "", false
			}
			*p = f.Value
			continue
		}
		regular = true
		if !validField(f) {
			return nil, 0, "", false
		}
		if r := refused(f); r != "" && refusal == "" {
			refusal = r
		}
		if f.Name == "cookie" {
			cookies = append(cookies, f.Value)
			continue
		}
		k := http.CanonicalHeaderKey(f.Name)
		hdr[k] = append(hdr[k], f.Value)
	}
	if len(cookies) > 0 {
		// RFC 9113 section 8.2.3: one field for the next hop.
		hdr["Cookie"] = []string{strings.Join(cookies, "; ")}
	}
	if method == "" || (method != http.MethodConnect && (scheme == "" || path == "")) ||
		!httpguts.ValidHeaderFieldName(method) {
		return nil, 0, "", false
	}
	if authority == "" {
		authority = hdr.Get("Host")
	}
	delete(hdr, "Host")
	declared = -1
	if vv := hdr["Content-Length"]; len(vv) > 0 {
		n, err := strconv.ParseUint(vv[0], 10, 63)
		if err != nil || len(vv) > 1 || (end && n != 0) {
			return nil, 0, "", false
		}
		declared = int64(n)
	}
	var u *url.URL
	switch {
	case method == http.MethodConnect:
		if path != "" || scheme != "" {
			return nil, 0, "", false
		}
		u = &url.URL{Host: authority}
	case path == "*" && method == http.MethodOptions:
		u = &url.URL{Path: "*"}
	default:
		var err error
		if u, err = url.ParseRequestURI(path); err != nil {
			return nil, 0, "", false
		}
	}
	req = &http.Request{Method: method, URL: u, Proto: "HTTP/2.0", ProtoMajor: 2, Header: hdr,
		Host: authority, RemoteAddr: c.remote, RequestURI: path, TLS: c.tls, Body: http.NoBody}
	if !end {
		req.ContentLength = declared
	}
	for _, v := range hdr["Trailer"] {
		for name := range strings.SplitSeq(v, ",") {
			if name = http.CanonicalHeaderKey(strings.TrimSpace(name)); name != "" {
				if req.Trailer == nil {
					req.Trailer = http.Header{}
				}
				req.Trailer[name] = nil
			}
		}
	}
	return req, declared, refusal, true
}
