package h1

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Router decides from a request's head whether the relay forwards it, and
// how.
type Router interface {
	// Route returns how to forward the request, or false to leave the
	// connection, from this request on, to the fallback http.Server: a
	// request the router's owner answers itself (no tunnel, refused, over a
	// limit) is answered there exactly as before the relay existed.
	Route(h *Head, remote string) (Route, bool)
}

// Route is how one request is forwarded.
type Route struct {
	// Key names what an upstream connection may carry: a host at the edge,
	// an address at the agent. A request for another key gets a new one.
	Key string
	// Dial opens an upstream connection for Key; it bounds its own wait.
	Dial func(ctx context.Context) (net.Conn, error)
	// Set are fields written after the client's; Drop names (lower case)
	// fields of the client's that are not passed on. Drop must name the
	// fields of Set, so that a client cannot send its own.
	Set  []Field
	Drop []string
	// ResponseSet are fields written after the upstream's in its final
	// answer; ResponseDrop names (lower case) fields of the upstream's
	// that are not passed on, and must name those of ResponseSet.
	ResponseSet  []Field
	ResponseDrop []string
	// Fail is the answer to a request that found no upstream, or none that
	// answered.
	Fail func(err error) Answer
	// Done, if set, is told how the exchange ended: the status sent to the
	// client (0 when none), the body bytes of the request and of the
	// answer, and how long it took.
	Done func(status int, in, out int64, took time.Duration)
}

// Answer is a short answer the relay writes itself.
type Answer struct {
	Status int
	Header []Field
	Body   string
}

// TextAnswer is what http.Error would write: msg and a newline, as plain
// text the browser must not sniff.
func TextAnswer(status int, msg string, header ...Field) Answer {
	h := append([]Field{
		{Name: []byte("Content-Type"), Value: []byte("text/plain; charset=utf-8")},
		{Name: []byte("X-Content-Type-Options"), Value: []byte("nosniff")},
	}, header...)
	return Answer{Status: status, Header: h, Body: msg + "\n"}
}

// appendAnswer appends a as a complete message.
func appendAnswer(b []byte, a Answer, closing bool) []byte {
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(a.Status), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(a.Status)...)
	b = append(b, "\r\n"...)
	for _, f := range a.Header {
		b = appendField(b, f.Name, f.Value)
	}
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(len(a.Body)), 10)
	b = append(b, "\r\n"...)
	if closing {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, a.Body...)
}

// appendRequest appends the head the next hop gets: the client's request
// line and the fields it passes on (Head.passedOn) less those the route
// drops, then "TE: trailers" when the client asked for trailers (gRPC
// needs it), then the framing the relay applies, then the route's own
// fields.
func appendRequest(b []byte, h *Head, rt *Route) []byte {
	line, _ := cutLine(h.Raw)
	b = append(b, line...)
	b = append(b, "\r\n"...)
	for _, f := range h.Fields {
		if !h.passedOn(f.Name) || dropped(f.Name, rt.Drop) {
			continue
		}
		b = appendField(b, f.Name, f.Value)
	}
	if h.Trailers {
		b = append(b, "Te: trailers\r\n"...)
	}
	b = appendFraming(b, h.Chunked, h.ContentLength)
	for _, f := range rt.Set {
		b = appendField(b, f.Name, f.Value)
	}
	return append(b, "\r\n"...)
}

// appendResponse appends the head the client gets: HTTP/1.1, the status,
// the fields the answer passes on (less those the route drops from a final
// answer), its framing (none on a 1xx or 204, which have no body by
// definition), the route's own fields of a final answer, and
// "Connection: close" when the relay closes the connection after it.
func appendResponse(b []byte, h *Head, closing bool, rt *Route) []byte {
	line, _ := cutLine(h.Raw)
	b = append(b, "HTTP/1.1 "...)
	b = append(b, line[9:]...)
	b = append(b, "\r\n"...)
	final := h.Status >= 200 && rt != nil
	for _, f := range h.Fields {
		if h.passedOn(f.Name) && (!final || !dropped(f.Name, rt.ResponseDrop)) {
			b = appendField(b, f.Name, f.Value)
		}
	}
	if h.Status >= 200 && h.Status != 204 {
		b = appendFraming(b, h.Chunked, h.ContentLength)
	}
	if final {
		for _, f := range rt.ResponseSet {
			b = appendField(b, f.Name, f.Value)
		}
	}
	if closing {
		b = append(b, "Connection: close\r\n"...)
	}
	return append(b, "\r\n"...)
}

// appendFraming writes the framing the relay applies to a body: chunked,
// or its length; nothing for a message whose body is delimited otherwise.
// The sender's own framing fields are never copied (httprule.Framing), so
// the next hop reads exactly the framing the relay copies by.
func appendFraming(b []byte, chunked bool, length int64) []byte {
	switch {
	case chunked:
		return append(b, "Transfer-Encoding: chunked\r\n"...)
	case length >= 0:
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, length, 10)
		return append(b, "\r\n"...)
	}
	return b
}

func appendField(b, name, value []byte) []byte {
	b = append(b, name...)
	b = append(b, ": "...)
	b = append(b, value...)
	return append(b, "\r\n"...)
}

func dropped(name []byte, drop []string) bool {
	for _, d := range drop {
		if equalFold(name, d) {
			return true
		}
	}
	return false
}
