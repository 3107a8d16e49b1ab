package pubhost

import "regexp"

// PathType is how a route of a host's table matches the request path.
// Ingress's ImplementationSpecific is served as Prefix, and HTTPRoute's
// PathPrefix is Prefix.
type PathType int

const (
	// Prefix compares whole path segments ("/api" matches "/api" and
	// "/api/users", not "/apix"); a trailing slash is ignored.
	Prefix PathType = iota
	// Exact matches the path exactly.
	Exact
)

// String names the type in route patterns, events and metrics.
func (t PathType) String() string {
	if t == Exact {
		return "Exact"
	}
	return "Prefix"
}

// Conditions are what an HTTPRoute match asks of a request beyond its
// path. Header names compare case-insensitively, values and query
// parameters exactly (or by regular expression).
type Conditions struct {
	// Host is a route hostname the request's host must match: exact, or
	// "*.example.com" for any name below example.com; "" any. Only a
	// table that serves several hosts (a Gateway address) sets it.
	Host    string
	Method  string // "" any
	Headers []ValueMatch
	Query   []ValueMatch
}

// ValueMatch matches one header or query parameter.
type ValueMatch struct {
	Name  string
	Value string
	// Regexp, when set, is matched instead of Value (RE2 syntax).
	Regexp *regexp.Regexp
}

// Matches reports whether a value got (ok: present at all) matches.
func (v ValueMatch) Matches(got string, ok bool) bool {
	if !ok {
		return false
	}
	if v.Regexp != nil {
		return v.Regexp.MatchString(got)
	}
	return got == v.Value
}
