// Package h1 relays plain HTTP/1.1 exchanges between two connections with
// one parse of each message head and no parse of bodies beyond their
// framing: a request head is read, checked and written on with the
// forwarding headers changed, its body copied by its framing
// (Content-Length or chunked, copied verbatim), and the answer's head and
// body come back the same way. The edge and the agent use it for the
// requests that need nothing else; net/http keeps the rest (see Server).
//
// The parser is strict on purpose: it takes only heads whose framing every
// HTTP/1.1 peer reads the same way, so that the edge, the agent and a
// backend always agree where one request ends and the next begins (no
// request smuggling). Anything else, from HTTP/1.0 and obs-fold to a bare
// LF, Transfer-Encoding other than chunked, two Content-Lengths, an
// upgrade or Expect, is not rejected here but handed over whole to
// net/http, which answers it as it always did. FuzzRequestHead checks the
// parser against net/http's: what it takes, net/http takes and frames the
// same way.
package h1

import (
	"bytes"
	"errors"
	"strconv"

	"golang.org/x/net/http/httpguts"

	"code.tuna.am/tuna/k8s-operator/internal/httprule"
)

// Field is one header field; Name keeps the case it was sent in.
type Field struct {
	Name, Value []byte
}

// Head is a parsed message head. Its slices point into the reader's
// buffer: they are valid until the reader is read again.
type Head struct {
	// Raw is the whole head, the final empty line included.
	Raw []byte
	// Method and Target are a request's; Status a response's.
	Method, Target []byte
	Status         int
	// Minor is the x of HTTP/1.x.
	Minor  int
	Fields []Field
	// Host is a request's Host field.
	Host []byte
	// ContentLength is the body's declared length, -1 when none is.
	ContentLength int64
	// Chunked: the body is chunked (Transfer-Encoding: chunked).
	Chunked bool
	// Close: the sender closes the connection after this message.
	Close bool
	// Trailers: a request's TE asks for trailers.
	Trailers bool
	// hop lists the field names that Connection names (as sent).
	hop [][]byte
	// upgrade: Connection names "upgrade".
	upgrade bool
}

// errNotSimple is a head this package leaves to net/http.
var errNotSimple = errors.New("h1: not a simple HTTP/1.1 head")

// errBothFramings is a request framed by both Content-Length and chunked:
// a smuggling attempt more often than not (RFC 9112 section 6.1). The
// relay refuses it (400, and the connection closes), as nginx does,
// rather than hand it over: net/http would frame it by its chunks and
// keep the connection, reading what follows as the client's next request.
var errBothFramings = errors.New("h1: a request framed by both Content-Length and Transfer-Encoding")

// ErrMalformed is an answer head that no HTTP/1.1 peer should send.
var ErrMalformed = errors.New("h1: malformed HTTP/1.1 answer head")

// headEnd returns the length of the head at the start of b (through its
// empty line), or 0 when b holds no complete head. A bare LF before the
// end makes the head not simple.
func headEnd(b []byte) (int, error) {
	i := bytes.Index(b, []byte("\r\n\r\n"))
	if i < 0 {
		if bytes.IndexByte(bareLF(b), '\n') >= 0 {
			return 0, errNotSimple
		}
		return 0, nil
	}
	if bytes.IndexByte(bareLF(b[:i+2]), '\n') >= 0 {
		return 0, errNotSimple
	}
	return i + 4, nil
}

// bareLF returns b from its first LF not preceded by CR, or nil.
func bareLF(b []byte) []byte {
	for i := 0; i < len(b); i++ {
		if b[i] == '\n' && (i == 0 || b[i-1] != '\r') {
			return b[i:]
		}
	}
	return nil
}

// parseRequest parses a complete request head (raw, as headEnd found it).
func parseRequest(raw []byte, h *Head) error {
	*h = Head{Raw: raw, Fields: h.Fields[:0], hop: h.hop[:0], ContentLength: -1}
	line, rest := cutLine(raw)
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 || !isToken(line[:sp]) {
		return errNotSimple
	}
	h.Method, line = line[:sp], line[sp+1:]
	sp = bytes.IndexByte(line, ' ')
	if sp <= 0 || line[0] != '/' || !isTarget(line[:sp]) {
		// Only origin-form: absolute-form, authority-form (CONNECT) and
		// asterisk-form are net/http's.
		return errNotSimple
	}
	h.Target = line[:sp]
	if !bytes.Equal(line[sp+1:], []byte("HTTP/1.1")) {
		return errNotSimple
	}
	h.Minor = 1
	if isMethod(h.Method, "CONNECT") || isMethod(h.Method, "PRI") {
		return errNotSimple
	}
	if err := parseFields(rest, h); err != nil {
		return errNotSimple
	}
	hosts, lengths := 0, 0
	for _, f := range h.Fields {
		switch {
		case equalFold(f.Name, "content-length"):
			lengths++
		case equalFold(f.Name, "host"):
			hosts++
			h.Host = f.Value
		case equalFold(f.Name, "upgrade"), equalFold(f.Name, "expect"):
			return errNotSimple
		case equalFold(f.Name, "te"):
			h.Trailers = h.Trailers || hasToken(f.Value, "trailers")
		}
	}
	if hosts != 1 || lengths > 1 || len(h.Host) == 0 || !httpguts.ValidHostHeader(string(h.Host)) {
		return errNotSimple
	}
	if err := framing(h); err != nil {
		return errNotSimple
	}
	if h.Chunked && h.ContentLength >= 0 {
		return errBothFramings
	}
	if h.upgrade {
		return errNotSimple
	}
	return nil
}

// parseResponse parses a complete answer head.
func parseResponse(raw []byte, h *Head) error {
	*h = Head{Raw: raw, Fields: h.Fields[:0], hop: h.hop[:0], ContentLength: -1}
	line, rest := cutLine(raw)
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return ErrMalformed
	}
	switch line[7] {
	case '0':
		h.Minor = 0
	case '1':
		h.Minor = 1
	default:
		return ErrMalformed
	}
	code := line[9:12]
	if code[0] < '1' || code[0] > '5' || !isDigits(code) || (len(line) > 12 && line[12] != ' ') {
		return ErrMalformed
	}
	h.Status, _ = strconv.Atoi(string(code))
	if len(line) > 13 && !isFieldValue(line[13:]) {
		return ErrMalformed
	}
	if err := parseFields(rest, h); err != nil {
		// Also a Connection option naming a framing field: an answer
		// that no hop may re-frame is refused (502), never passed on.
		return ErrMalformed
	}
	if err := framing(h); err != nil {
		return err
	}
	if h.Chunked && (h.ContentLength >= 0 || h.Minor == 0) {
		// HTTP/1.0 has no chunked framing: net/http reads such a body to
		// the end of the connection.
		return ErrMalformed
	}
	if h.Minor == 0 && !h.keepAlive() {
		h.Close = true
	}
	return nil
}

// parseFields parses the field lines after the start line. The options
// of a Connection field are classified by the rulebook: one that names a
// framing field or Host makes the message one the relay must not
// re-frame (errCritical).
func parseFields(b []byte, h *Head) error {
	for {
		line, rest := cutLine(b)
		if len(line) == 0 {
			return nil
		}
		b = rest
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !isToken(line[:colon]) {
			// Also a line that starts with a space: obs-fold.
			return ErrMalformed
		}
		v := trimOWS(line[colon+1:])
		if !isFieldValue(v) {
			return ErrMalformed
		}
		f := Field{Name: line[:colon], Value: v}
		h.Fields = append(h.Fields, f)
		if equalFold(f.Name, "connection") {
			if err := eachToken(v, h.connectionOption); err != nil {
				return err
			}
		}
	}
}

// errCritical is a Connection option that names a framing field or Host.
var errCritical = errors.New("h1: Connection names a field that carries the framing or the target")

// connectionOption applies one token of a Connection field.
func (h *Head) connectionOption(t []byte) error {
	switch httprule.ConnectionOption(t) {
	case httprule.OptionClose:
		h.Close = true
	case httprule.OptionKeepAlive:
	case httprule.OptionUpgrade:
		h.upgrade = true
	case httprule.OptionCritical:
		return errCritical
	default:
		h.hop = append(h.hop, t)
	}
	return nil
}

// framing sets ContentLength and Chunked from the fields: one
// Content-Length of digits (repeats of the same value allowed), and
// Transfer-Encoding only as exactly "chunked", once.
func framing(h *Head) error {
	tes := 0
	for _, f := range h.Fields {
		switch {
		case equalFold(f.Name, "content-length"):
			if !isDigits(f.Value) || len(f.Value) > 18 {
				return ErrMalformed
			}
			n, _ := strconv.ParseInt(string(f.Value), 10, 64)
			if h.ContentLength >= 0 && n != h.ContentLength {
				return ErrMalformed
			}
			h.ContentLength = n
		case equalFold(f.Name, "transfer-encoding"):
			tes++
			if tes > 1 || !equalFold(f.Value, "chunked") {
				return ErrMalformed
			}
			h.Chunked = true
		}
	}
	return nil
}

// keepAlive: an HTTP/1.0 answer that asks to keep its connection.
func (h *Head) keepAlive() bool {
	for _, f := range h.Fields {
		if equalFold(f.Name, "connection") && hasToken(f.Value, "keep-alive") {
			return true
		}
	}
	return false
}

// passedOn reports whether a field of the head is copied to the next
// hop: not a hop-by-hop field (the rulebook's, or one Connection names),
// and not a framing field, which the relay writes itself from the framing
// it applies (appendFraming).
func (h *Head) passedOn(name []byte) bool {
	if httprule.Hop(name) || httprule.Framing(name) {
		return false
	}
	for _, t := range h.hop {
		if bytes.EqualFold(name, t) {
			return false
		}
	}
	return true
}

// cutLine splits b at its first CRLF; the line excludes it.
func cutLine(b []byte) (line, rest []byte) {
	i := bytes.Index(b, []byte("\r\n"))
	if i < 0 {
		return b, nil
	}
	return b[:i], b[i+2:]
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// eachToken calls fn for each non-empty element of a comma-separated
// list of tokens.
func eachToken(v []byte, fn func([]byte) error) error {
	for len(v) > 0 {
		var t []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			t, v = v[:i], v[i+1:]
		} else {
			t, v = v, nil
		}
		if t = trimOWS(t); len(t) == 0 {
			continue
		}
		if !isToken(t) {
			return ErrMalformed
		}
		if err := fn(t); err != nil {
			return err
		}
	}
	return nil
}

func hasToken(v []byte, token string) bool {
	found := false
	_ = eachToken(v, func(t []byte) error {
		found = found || equalFold(t, token)
		return nil
	})
	return found
}

// equalFold compares b with s, which is lower case, in ASCII case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

func isMethod(b []byte, m string) bool { return string(b) == m }

func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !httpguts.IsTokenRune(rune(c)) {
			return false
		}
	}
	return true
}

// isTarget: visible ASCII only (no space, no control, no byte over 0x7e),
// and every '%' of the path (before any '?') followed by two hex digits:
// net/http refuses a path it cannot unescape ("/%"), and a target the
// next hop reads differently is not the relay's to pass.
func isTarget(b []byte) bool {
	inPath := true
	for i, c := range b {
		if c <= 0x20 || c >= 0x7f {
			return false
		}
		switch {
		case c == '?':
			inPath = false
		case c == '%' && inPath:
			if i+2 >= len(b) || !isHex(b[i+1]) || !isHex(b[i+2]) {
				return false
			}
		}
	}
	return true
}

// isFieldValue: visible ASCII, obs-text, and spaces and tabs inside; no
// control character (CR, LF and NUL included).
func isFieldValue(b []byte) bool {
	for _, c := range b {
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

func isDigits(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
