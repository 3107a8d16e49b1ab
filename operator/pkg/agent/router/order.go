package router

import (
	"net"
	"net/http"
	"slices"
	"strings"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

// matches reports whether req meets c (nil: no conditions).
func matches(c *pubhost.Conditions, req *http.Request) bool {
	if c == nil {
		return true
	}
	if c.Host != "" && !HostMatches(c.Host, req.Host) {
		return false
	}
	if c.Method != "" && req.Method != c.Method {
		return false
	}
	for _, h := range c.Headers {
		vals := req.Header.Values(h.Name)
		// The first value decides, as the spec allows for repeated
		// headers other than Set-Cookie.
		got, ok := "", len(vals) > 0
		if ok {
			got = vals[0]
		}
		if !h.Matches(got, ok) {
			return false
		}
	}
	if len(c.Query) > 0 {
		q := req.URL.Query()
		for _, m := range c.Query {
			vals, ok := q[m.Name]
			got := ""
			if ok && len(vals) > 0 {
				got = vals[0]
			}
			if !m.Matches(got, ok) {
				return false
			}
		}
	}
	return true
}

// HostMatches reports whether host (as in a request, maybe with a port)
// matches a route hostname: equal, ignoring case, or below the suffix of a
// wildcard "*.example.com".
func HostMatches(pattern, host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	pattern = strings.ToLower(pattern)
	if suffix, ok := strings.CutPrefix(pattern, "*"); ok {
		return strings.HasSuffix(host, suffix) && len(host) > len(suffix)
	}
	return host == pattern
}

// hostSpecificity orders host conditions as the Gateway API does: an exact
// hostname first, then wildcards by length, then none.
func hostSpecificity(c *pubhost.Conditions) int {
	switch {
	case c == nil || c.Host == "":
		return 0
	case strings.HasPrefix(c.Host, "*"):
		return len(c.Host)
	}
	return 1 << 16
}

func counts(c *pubhost.Conditions) (method, headers, query int) {
	if c == nil {
		return 0, 0, 0
	}
	if c.Method != "" {
		method = 1
	}
	return method, len(c.Headers), len(c.Query)
}

// newOrdered builds a table that scans its routes in the Gateway API's
// precedence order, which holds Ingress's order as a special case:
//
//  1. an Exact path before any Prefix;
//  2. the longest Prefix first;
//  3. a route with a method match before one without;
//  4. more header matches first;
//  5. more query parameter matches first;
//  6. then Rank (oldest route, namespace/name, rule and match order).
func newOrdered(routes []Route, fallback *Route) *Table {
	t := &Table{fallback: fallback}
	for i := range routes {
		r := routes[i]
		if r.Type == pubhost.Prefix {
			r.Path = trimPrefix(r.Path)
		}
		t.ordered = append(t.ordered, &r)
	}
	slices.SortStableFunc(t.ordered, compare)
	t.n = len(t.ordered)
	if fallback != nil {
		t.n++
	}
	return t
}

func compare(a, b *Route) int {
	if d := hostSpecificity(b.Conditions) - hostSpecificity(a.Conditions); d != 0 {
		return d
	}
	if a.Type != b.Type {
		if a.Type == pubhost.Exact {
			return -1
		}
		return 1
	}
	if d := len(b.Path) - len(a.Path); d != 0 {
		return d
	}
	am, ah, aq := counts(a.Conditions)
	bm, bh, bq := counts(b.Conditions)
	if d := bm - am; d != 0 {
		return d
	}
	if d := bh - ah; d != 0 {
		return d
	}
	if d := bq - aq; d != 0 {
		return d
	}
	if d := a.Rank - b.Rank; d != 0 {
		return d
	}
	return strings.Compare(a.Path, b.Path)
}

func (t *Table) matchOrdered(req *http.Request, p string) *Route {
	for _, r := range t.ordered {
		if r.Type == pubhost.Exact {
			if p != r.Path {
				continue
			}
		} else if p != r.Path && !strings.HasPrefix(p, r.Path+"/") {
			continue
		}
		if matches(r.Conditions, req) {
			return r
		}
	}
	return t.fallback
}
