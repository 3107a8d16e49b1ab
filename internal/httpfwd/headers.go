package httpfwd

import (
	"io"
	"net/http"
	"strings"

	"code.tuna.am/tuna/k8s-operator/internal/httprule"
)

// RemoveHopHeaders removes from h what the rulebook does not pass on
// (httprule): hop-by-hop fields and those Connection names, and the
// framing fields and Trailer, which net/http writes itself from the
// message's own framing and trailers. A Connection option that names a
// framing field or Host changes nothing here: net/http frames from its
// parse, never from these fields.
func RemoveHopHeaders(h http.Header) {
	for _, v := range h["Connection"] {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" && httprule.ConnectionOption(name) == httprule.OptionHop {
				h.Del(name)
			}
		}
	}
	for name := range h {
		if httprule.Hop(name) || httprule.Framing(name) || name == "Trailer" {
			delete(h, name)
		}
	}
}

// hasToken reports whether a comma-separated header holds token, in any
// case.
func hasToken(values []string, token string) bool {
	for _, v := range values {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// IsUpgrade is a request that asks to switch protocols (WebSocket): it
// needs a connection of its own, so it goes through httputil.ReverseProxy.
func IsUpgrade(r *http.Request) bool {
	return hasToken(r.Header["Connection"], "upgrade") && r.Header.Get("Upgrade") != ""
}

// Outgoing is r as the next hop gets it: the hop-by-hop headers removed
// (Te: trailers kept, gRPC needs it), no User-Agent added where the client
// sent none, no body when it has none.
func Outgoing(r *http.Request) *http.Request {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Close = false
	if r.ContentLength == 0 {
		out.Body = nil
	}
	trailers := hasToken(r.Header["Te"], "trailers")
	RemoveHopHeaders(out.Header)
	if trailers {
		out.Header.Set("Te", "trailers")
	}
	if _, ok := out.Header["User-Agent"]; !ok {
		// Not Go's default: the next hop sees what the client sent.
		out.Header.Set("User-Agent", "")
	}
	ForwardTrailers(r, out)
	return out
}

// ForwardTrailers makes out, a copy of the inbound request in, carry in's
// request trailers. The inbound server fills in.Trailer's values only
// when the body ends, after out was made (Request.Clone copies the map
// with its values still empty), so they are copied as out's body ends,
// before the writer of out looks at out.Trailer; those the rulebook does
// not pass on (httprule.TrailerAllowed) stay behind. Only a request that
// declared trailers (the Trailer header, or HTTP/2's trailer section
// announced by it) carries any: an HTTP/2 hop ends every other body
// without a trailer section.
func ForwardTrailers(in, out *http.Request) {
	if in.Trailer == nil || out.Body == nil {
		out.Trailer = nil
		return
	}
	out.Trailer = http.Header{}
	for k := range in.Trailer {
		if httprule.TrailerAllowed(k) {
			out.Trailer[k] = nil
		}
	}
	out.Body = &trailerCopier{ReadCloser: out.Body, from: in.Trailer, to: out.Trailer}
}

// trailerCopier copies the allowed trailers of from into to when its
// body ends.
type trailerCopier struct {
	io.ReadCloser
	from, to http.Header
}

func (b *trailerCopier) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		for k, v := range b.from {
			if httprule.TrailerAllowed(k) {
				b.to[k] = v
			}
		}
	}
	return n, err
}
