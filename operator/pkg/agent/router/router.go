// Package router routes the requests of one host by path (Ingress) and by
// path, method, headers and query (Gateway API HTTPRoute). A route
// table is an immutable value; the Router swaps tables atomically, so a
// route change never takes a lock on the request path, never waits for
// requests in flight (they finish on the table they started with), and
// never touches the tunnel's session.
//
// Matching follows the Ingress specification: Exact matches the path
// exactly; Prefix compares whole path segments ("/api" matches "/api" and
// "/api/users", not "/apix"; a trailing slash in the route is ignored); an
// Exact match wins over any Prefix, the longest Prefix wins over shorter
// ones, and the fallback (the Ingress's defaultBackend) takes the rest.
//
// A route may also carry Conditions (an HTTPRoute match): then the
// Gateway API's precedence orders the candidates (see order.go), and the
// first route whose path and conditions both hold serves the request.
package router

import (
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/felixge/httpsnoop"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

// Route sends matching requests to Handler.
type Route struct {
	Type pubhost.PathType
	// Path is an absolute path; for Prefix a trailing slash is ignored.
	Path string
	// Name labels the route in metrics (bounded: the Ingress's pattern).
	Name    string
	Handler http.Handler
	// Conditions further restrict the route (nil: path only).
	Conditions *pubhost.Conditions
	// Rank breaks precedence ties between routes with conditions: lower
	// first (the Gateway API's oldest route, then namespace/name, then
	// rule and match order). Set by the caller.
	Rank int
}

// Table is an immutable route table.
type Table struct {
	exact    map[string]*Route
	prefixes []*Route // longest first
	// ordered holds every route, in precedence order, when any route has
	// conditions; Match then scans it instead of the map and prefixes.
	ordered  []*Route
	fallback *Route
	n        int
}

// NewTable builds a table; on duplicate routes (same type and path) the
// first wins. fallback may be nil.
func NewTable(routes []Route, fallback *Route) *Table {
	t := &Table{exact: map[string]*Route{}, fallback: fallback}
	for _, r := range routes {
		if r.Conditions != nil {
			return newOrdered(routes, fallback)
		}
	}
	seen := map[string]bool{}
	for i := range routes {
		r := routes[i]
		if r.Type == pubhost.Exact {
			if _, dup := t.exact[r.Path]; !dup {
				t.exact[r.Path] = &r
			}
			continue
		}
		r.Path = trimPrefix(r.Path)
		if !seen[r.Path] {
			seen[r.Path] = true
			t.prefixes = append(t.prefixes, &r)
		}
	}
	// Longest first; equal lengths cannot both match one path, but keep
	// the order deterministic.
	slices.SortStableFunc(t.prefixes, func(a, b *Route) int {
		if d := len(b.Path) - len(a.Path); d != 0 {
			return d
		}
		return strings.Compare(a.Path, b.Path)
	})
	t.n = len(t.exact) + len(t.prefixes)
	if fallback != nil {
		t.n++
	}
	return t
}

// Len is the number of routes, the fallback included.
func (t *Table) Len() int { return t.n }

// trimPrefix drops a Prefix route's trailing slashes: "/" becomes "", so
// that every absolute path matches it.
func trimPrefix(p string) string { return strings.TrimRight(p, "/") }

// Match returns the route for a request path (already cleaned), or nil,
// for a GET without headers or query.
func (t *Table) Match(p string) *Route {
	return t.MatchRequest(&http.Request{Method: http.MethodGet, Header: http.Header{}}, p)
}

// MatchRequest returns the route for req, whose path p is already
// cleaned, or nil.
func (t *Table) MatchRequest(req *http.Request, p string) *Route {
	if t.ordered != nil {
		return t.matchOrdered(req, p)
	}
	if r, ok := t.exact[p]; ok {
		return r
	}
	for _, r := range t.prefixes {
		if p == r.Path || strings.HasPrefix(p, r.Path+"/") {
			return r
		}
	}
	return t.fallback
}

// CleanPath resolves "." and ".." segments and repeated slashes, keeping a
// trailing slash, so "/api/../admin" is matched as "/admin". The request
// itself is forwarded as it came.
func CleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// Observer records one request: the matched route's name ("" when none
// matched), the status code and the time to the end of the response.
type Observer func(route string, code int, took time.Duration)

// Router is the http.Handler of one host.
type Router struct {
	host    string
	table   atomic.Pointer[Table]
	observe Observer
}

// New returns a router for host with an empty table; observe may be nil.
func New(host string, observe Observer) *Router {
	r := &Router{host: host, observe: observe}
	r.table.Store(NewTable(nil, nil))
	return r
}

// Swap makes later requests use t.
func (r *Router) Swap(t *Table) { r.table.Store(t) }

// Table is the table in use.
func (r *Router) Table() *Table { return r.table.Load() }

func (r *Router) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	route := r.table.Load().MatchRequest(req, CleanPath(req.URL.Path))
	var h http.Handler = http.HandlerFunc(r.notFound)
	name := ""
	if route != nil {
		h, name = route.Handler, route.Name
	}
	if r.observe == nil {
		h.ServeHTTP(w, req)
		return
	}
	// httpsnoop keeps the writer's Hijacker (WebSocket) and Flusher.
	m := httpsnoop.CaptureMetrics(h, w, req)
	r.observe(name, m.Code, m.Duration)
}

func (r *Router) notFound(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Tuna-Error", "no-route")
	w.WriteHeader(http.StatusNotFound)
	fmt.Fprintf(w, "tuna: no Ingress path or HTTPRoute rule of host %s matches %s\n", r.host, req.URL.Path)
}
