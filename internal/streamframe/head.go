package streamframe

import (
	"encoding/binary"
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"

	"code.tuna.am/tuna/k8s-operator/internal/httprule"
)

// RequestHead is what a request head frame carries.
type RequestHead struct {
	Method    string
	Authority string
	// Path is the request target: an absolute path and query, or "*".
	Path string
	// ContentLength is the body's declared length, -1 when not declared;
	// 0 with NoBody.
	ContentLength int64
	Header        http.Header
	// Trailer names the trailer fields the body's end may carry.
	Trailer []string
	// NoBody: the request ends with its head.
	NoBody bool
}

// ResponseHead is what a response head frame carries.
type ResponseHead struct {
	Status int
	// ContentLength is the answer's declared length, -1 when not
	// declared. An answer to HEAD, or a 304, declares one and has none.
	ContentLength int64
	Header        http.Header
	NoBody        bool
}

// AppendRequest appends h's frame to b; it refuses a head that decoding
// would refuse.
func AppendRequest(b []byte, h *RequestHead) ([]byte, error) {
	if err := h.check(); err != nil {
		return b, err
	}
	start := len(b)
	p := append(openHead(b, TypeRequest), flags(h.NoBody))
	p = binary.AppendVarint(p, h.ContentLength)
	p = appendString(p, h.Method)
	p = appendString(p, h.Authority)
	p = appendString(p, h.Path)
	p = appendFields(p, h.Header)
	p = binary.AppendUvarint(p, uint64(len(h.Trailer)))
	for _, name := range h.Trailer {
		p = appendString(p, name)
	}
	return closeHead(p, start)
}

// DecodeRequest decodes a request head frame's payload.
func DecodeRequest(p []byte) (*RequestHead, error) {
	d := decoder{p: p}
	h := &RequestHead{NoBody: d.flags()}
	h.ContentLength = d.varint()
	h.Method, h.Authority, h.Path = d.string(), d.string(), d.string()
	h.Header = d.fields()
	for n := d.uvarint(); n > 0 && d.err == nil; n-- {
		h.Trailer = append(h.Trailer, d.string())
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	return h, h.check()
}

// AppendResponse appends h's frame to b; it refuses a head that decoding
// would refuse.
func AppendResponse(b []byte, h *ResponseHead) ([]byte, error) {
	if err := h.check(); err != nil {
		return b, err
	}
	start := len(b)
	p := append(openHead(b, TypeResponse), flags(h.NoBody))
	p = binary.AppendUvarint(p, uint64(h.Status))
	p = binary.AppendVarint(p, h.ContentLength)
	p = appendFields(p, h.Header)
	return closeHead(p, start)
}

// DecodeResponse decodes a response head frame's payload.
func DecodeResponse(p []byte) (*ResponseHead, error) {
	d := decoder{p: p}
	h := &ResponseHead{NoBody: d.flags()}
	status := d.uvarint()
	h.ContentLength = d.varint()
	h.Header = d.fields()
	if err := d.end(); err != nil {
		return nil, err
	}
	if status > 999 {
		return nil, frameErr("status %d", status)
	}
	h.Status = int(status)
	return h, h.check()
}

// AppendEnd appends an end frame with the trailers that the rulebook
// passes on; the others stay behind, as on every path.
func AppendEnd(b []byte, trailer http.Header) []byte {
	start := len(b)
	p := appendFields(openHead(b, TypeEnd), allowedTrailers(trailer))
	out, err := closeHead(p, start)
	if err != nil { // trailers larger than any head: they stay behind
		return closeHeadUnchecked(appendFields(openHead(b[:start], TypeEnd), nil), start)
	}
	return out
}

// DecodeEnd decodes an end frame's trailers.
func DecodeEnd(p []byte) (http.Header, error) {
	d := decoder{p: p}
	t := d.fields()
	if err := d.end(); err != nil {
		return nil, err
	}
	for name, vv := range t {
		if err := checkField(name, vv); err != nil {
			return nil, err
		}
		if !httprule.TrailerAllowed(name) {
			return nil, frameErr("trailer %q", name)
		}
	}
	return t, nil
}

// allowedTrailers is t without the fields the rulebook keeps out of a
// trailer section and those no field may be.
func allowedTrailers(t http.Header) http.Header {
	if len(t) == 0 {
		return nil
	}
	out := http.Header{}
	for name, vv := range t {
		if httprule.TrailerAllowed(name) && checkField(name, vv) == nil {
			out[http.CanonicalHeaderKey(name)] = vv
		}
	}
	return out
}

func (h *RequestHead) check() error {
	switch {
	case !httpguts.ValidHeaderFieldName(h.Method) || h.Method == http.MethodConnect:
		return frameErr("method %q", h.Method)
	case h.Authority == "" || !httpguts.ValidHostHeader(h.Authority):
		return frameErr("authority %q", h.Authority)
	case !validPath(h.Path, h.Method):
		return frameErr("path %q", h.Path)
	case h.ContentLength < -1 || (h.NoBody && h.ContentLength != 0):
		return frameErr("content length %d", h.ContentLength)
	}
	for _, name := range h.Trailer {
		if !validTrailer(name) {
			return frameErr("trailer %q", name)
		}
	}
	return checkHeader(h.Header)
}

func (h *ResponseHead) check() error {
	if h.Status < 200 || h.Status > 999 {
		return frameErr("status %d", h.Status)
	}
	if h.ContentLength < -1 {
		return frameErr("content length %d", h.ContentLength)
	}
	return checkHeader(h.Header)
}

// validTrailer: a trailer name that a head may announce.
func validTrailer(name string) bool {
	return httpguts.ValidHeaderFieldName(name) && httprule.TrailerAllowed(name)
}

// validPath: an origin-form target ("/" and on), or "*" for OPTIONS, of
// visible ASCII only.
func validPath(p, method string) bool {
	if p == "*" {
		return method == http.MethodOptions
	}
	if !strings.HasPrefix(p, "/") {
		return false
	}
	for i := range len(p) {
		if c := p[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// checkHeader applies the rulebook to a head's fields: none is
// hop-by-hop (but TE: trailers, which gRPC needs), a framing field, Host
// or Trailer, and every name and value is one HTTP allows.
func checkHeader(h http.Header) error {
	for name, vv := range h {
		if err := checkField(name, vv); err != nil {
			return err
		}
		switch {
		case strings.EqualFold(name, "te"):
			if len(vv) != 1 || vv[0] != "trailers" {
				return frameErr("TE %q", vv)
			}
		case httprule.Hop(name), httprule.Framing(name), strings.EqualFold(name, "host"), strings.EqualFold(name, "trailer"):
			return frameErr("field %q", name)
		}
	}
	return nil
}

func checkField(name string, vv []string) error {
	if !httpguts.ValidHeaderFieldName(name) {
		return frameErr("field name %q", name)
	}
	for _, v := range vv {
		if !httpguts.ValidHeaderFieldValue(v) {
			return frameErr("value of %q", name)
		}
	}
	return nil
}

func flags(noBody bool) byte {
	if noBody {
		return FlagEnd
	}
	return 0
}

// openHead appends a head frame's header, its length still to be set by
// closeHead, which checks it against MaxHead.
func openHead(b []byte, typ byte) []byte {
	return append(b, typ, 0, 0, 0, 0)
}

func closeHead(b []byte, start int) ([]byte, error) {
	if n := len(b) - start - headerLen; n > MaxHead {
		return b[:start], frameErr("a head of %d bytes", n)
	}
	return closeHeadUnchecked(b, start), nil
}

func closeHeadUnchecked(b []byte, start int) []byte {
	frameHeader(b[start:], b[start], len(b)-start-headerLen)
	return b
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// appendFields writes the number of values, then each name and value.
func appendFields(b []byte, h http.Header) []byte {
	n := 0
	for _, vv := range h {
		n += len(vv)
	}
	b = binary.AppendUvarint(b, uint64(n))
	for name, vv := range h {
		for _, v := range vv {
			b = appendString(appendString(b, name), v)
		}
	}
	return b
}

// decoder reads a payload; the first error sticks, and every later read
// returns a zero value.
type decoder struct {
	p   []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = frameErr("a head cut short")
	}
	d.p = nil
}

func (d *decoder) flags() bool {
	if len(d.p) == 0 {
		d.fail()
		return false
	}
	f := d.p[0]
	d.p = d.p[1:]
	if f&^FlagEnd != 0 {
		d.err = frameErr("flags %#x", f)
	}
	return f&FlagEnd != 0
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.p)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.p)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.p)) {
		d.fail()
		return ""
	}
	s := string(d.p[:n])
	d.p = d.p[n:]
	return s
}

// fields reads what appendFields wrote, each name in canonical form.
func (d *decoder) fields() http.Header {
	h := http.Header{}
	for n := d.uvarint(); n > 0 && d.err == nil; n-- {
		name, v := d.string(), d.string()
		if d.err == nil {
			key := http.CanonicalHeaderKey(name)
			h[key] = append(h[key], v)
		}
	}
	return h
}

// end reports the first error, or bytes left over.
func (d *decoder) end() error {
	if d.err == nil && len(d.p) > 0 {
		d.err = frameErr("%d bytes after a head", len(d.p))
	}
	return d.err
}
