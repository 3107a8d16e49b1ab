package httprule

// Field names below are lower case; the functions compare in ASCII case
// and take a name as a string or as bytes (the relay's parse), without
// converting it.

// Name is a field name or token as an engine holds it.
type Name interface{ ~string | ~[]byte }

// hopFields apply to one connection only (RFC 9110 section 7.6.1), so a
// proxy never passes them on. Proxy-Connection and Keep-Alive are the
// legacy ones every proxy still drops.
var hopFields = []string{
	"connection", "proxy-connection", "keep-alive", "proxy-authenticate",
	"proxy-authorization", "te", "upgrade",
}

// framingFields say where a message's body ends. Each hop writes them
// from the framing it applies (a length or chunked), never by copying the
// sender's: a copy that another peer reads differently is how a request
// is smuggled.
var framingFields = []string{"content-length", "transfer-encoding"}

// Hop reports whether a field applies to one connection only and is never
// passed on. A field that a Connection option names is hop-by-hop too
// (see ConnectionOption); Trailer, which announces trailer fields, is
// end-to-end and stays.
func Hop[N Name](name N) bool { return in(name, hopFields) }

// Framing reports whether a field carries the framing of the body.
func Framing[N Name](name N) bool { return in(name, framingFields) }

// h2RefusedFields are connection-specific: an HTTP/2 message that
// carries one is malformed (RFC 9113 section 8.2.2), and so is one with
// TE other than "trailers" (H2RefusedTE).
var h2RefusedFields = []string{"connection", "proxy-connection", "keep-alive", "transfer-encoding", "upgrade"}

// H2Refused reports whether a field makes an HTTP/2 message malformed
// whatever its value; for TE, see H2RefusedTE.
func H2Refused[N Name](name N) bool { return in(name, h2RefusedFields) }

// H2RefusedTE reports whether a TE field of value v makes an HTTP/2
// message malformed: any value but "trailers".
func H2RefusedTE[N Name](v N) bool { return !equalFold(v, "trailers") }

// Option is what one token of a Connection field asks.
type Option int

const (
	// OptionKeepAlive is "keep-alive": nothing for HTTP/1.1.
	OptionKeepAlive Option = iota
	// OptionClose is "close": the sender ends the connection after this
	// message.
	OptionClose
	// OptionUpgrade is "upgrade": a switch of protocols, which needs a
	// connection of its own.
	OptionUpgrade
	// OptionHop names a field that applies to this connection only: it is
	// dropped, not passed on.
	OptionHop
	// OptionCritical names a field that no hop may drop: a framing field
	// (dropping it re-frames the body the sender framed, so its bytes
	// would be read as another message) or Host (the message's target).
	// Such a message is not simple: the relay hands a request to net/http,
	// which frames from its own parse, and refuses an answer (502).
	OptionCritical
)

// ConnectionOption classifies one token of a Connection field.
func ConnectionOption[N Name](token N) Option {
	switch {
	case equalFold(token, "close"):
		return OptionClose
	case equalFold(token, "keep-alive"):
		return OptionKeepAlive
	case equalFold(token, "upgrade"):
		return OptionUpgrade
	case Framing(token), equalFold(token, "host"):
		return OptionCritical
	}
	return OptionHop
}

// forwardedFields are the forwarding fields: the edge writes its own for
// every request (the client's address, the Host it asked for, the scheme
// it came over) and drops whatever a client sent under these names, so
// that a backend can trust them. RFC 7239's Forwarded is dropped and not
// written: a client's copy would contradict the edge's X-Forwarded-*.
var forwardedFields = []string{"forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto"}

// Forwarded reports whether a field is one the edge writes itself and
// never takes from a client.
func Forwarded[N Name](name N) bool { return in(name, forwardedFields) }

// ForwardedFields lists the forwarding fields (lower case), for engines
// that drop by list.
func ForwardedFields() []string { return append([]string(nil), forwardedFields...) }

// Canonical names of the forwarding fields the edge writes.
const (
	ForwardedFor   = "X-Forwarded-For"
	ForwardedHost  = "X-Forwarded-Host"
	ForwardedProto = "X-Forwarded-Proto"
)

// identityFields carry who an access policy found the client to be: the
// user, the e-mail, the groups, and an assertion of all three that the edge
// signs (a JWT). The edge writes them for a request it let through after a
// login, and drops whatever a client sent under these names on every host,
// with a policy or without, so that a backend can trust them.
var identityFields = []string{"x-tuna-user", "x-tuna-email", "x-tuna-groups", "x-tuna-assertion"}

// Canonical names of the identity fields the edge writes.
const (
	IdentityUser      = "X-Tuna-User"
	IdentityEmail     = "X-Tuna-Email"
	IdentityGroups    = "X-Tuna-Groups"
	IdentityAssertion = "X-Tuna-Assertion"
)

// Identity reports whether a field is one of the identity fields, which
// only the edge writes.
func Identity[N Name](name N) bool { return in(name, identityFields) }

// edgeFields are every field the edge writes itself: the forwarding and
// the identity fields.
var edgeFields = append(append([]string(nil), forwardedFields...), identityFields...)

// EdgeWritten reports whether a field is one the edge writes itself, so
// that a client's copy is dropped on every path: a forwarding or an
// identity field.
func EdgeWritten[N Name](name N) bool { return in(name, edgeFields) }

// EdgeFields lists the fields the edge writes itself (lower case): what
// every path of the edge drops from a client's request.
func EdgeFields() []string { return append([]string(nil), edgeFields...) }

// trailerRefused are fields a trailer section may not carry (RFC 9110
// section 6.5.1): framing, routing, request modifiers, authentication,
// the content's own description, and the forwarding and identity fields,
// which only the edge writes. A trailer is read after the body, when every hop has
// already acted on the header section: such a field there is either
// ignored or, by a peer that merges trailers into headers, taken as if
// the sender had sent it in the head.
var trailerRefused = []string{
	"content-length", "transfer-encoding", "host", "connection", "proxy-connection", "keep-alive",
	"te", "trailer", "upgrade", "expect", "max-forwards", "range", "if-match", "if-none-match",
	"if-modified-since", "if-unmodified-since", "if-range", "cache-control", "pragma",
	"authorization", "proxy-authorization", "proxy-authenticate", "www-authenticate", "set-cookie", "cookie",
	"content-encoding", "content-type", "content-range", "age", "expires", "date", "location",
	"retry-after", "vary",
	"forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto",
	"x-tuna-user", "x-tuna-email", "x-tuna-groups", "x-tuna-assertion",
}

// TrailerAllowed reports whether a trailer field is passed on; the others
// are dropped from the trailer section (the rest of it passes).
func TrailerAllowed[N Name](name N) bool { return !in(name, trailerRefused) }

func in[N Name](name N, list []string) bool {
	for _, f := range list {
		if equalFold(name, f) {
			return true
		}
	}
	return false
}

// equalFold compares s with lower, which is lower case, in ASCII case.
func equalFold[N Name](s N, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
