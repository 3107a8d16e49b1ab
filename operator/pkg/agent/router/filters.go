package router

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/felixge/httpsnoop"
)

// The HTTPRoute filters, as handlers that wrap the next one. They are built
// once per route table, so they hold no per-request state.

// HeaderChange sets, adds and removes headers (RequestHeaderModifier and
// ResponseHeaderModifier).
type HeaderChange struct {
	Set    []Header
	Add    []Header
	Remove []string
}

// Header is one header name and value.
type Header struct{ Name, Value string }

func (c HeaderChange) apply(h http.Header) {
	for _, s := range c.Set {
		h.Set(s.Name, s.Value)
	}
	for _, a := range c.Add {
		h.Add(a.Name, a.Value)
	}
	for _, r := range c.Remove {
		h.Del(r)
	}
}

// RequestHeaders changes the request's headers before next sees them.
func RequestHeaders(c HeaderChange, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		req = req.Clone(req.Context())
		c.apply(req.Header)
		if s := req.Header.Get("Host"); s != "" {
			// A Host set by the filter is the request's host, not a header.
			req.Host = s
			req.Header.Del("Host")
		}
		next.ServeHTTP(w, req)
	})
}

// ResponseHeaders changes the response's headers just before they are
// written. httpsnoop keeps the writer's Hijacker and Flusher.
func ResponseHeaders(c HeaderChange, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		done := false
		before := func() {
			if !done {
				done = true
				c.apply(w.Header())
			}
		}
		wrapped := httpsnoop.Wrap(w, httpsnoop.Hooks{
			WriteHeader: func(f httpsnoop.WriteHeaderFunc) httpsnoop.WriteHeaderFunc {
				return func(code int) {
					if code >= 200 || code == http.StatusSwitchingProtocols {
						before()
					}
					f(code)
				}
			},
			Write: func(f httpsnoop.WriteFunc) httpsnoop.WriteFunc {
				return func(b []byte) (int, error) { before(); return f(b) }
			},
			ReadFrom: func(f httpsnoop.ReadFromFunc) httpsnoop.ReadFromFunc {
				return func(src io.Reader) (int64, error) { before(); return f(src) }
			},
		})
		next.ServeHTTP(wrapped, req)
		before()
	})
}

// PathChange replaces a request path: the whole of it (Full), or the
// matched Prefix with Replace.
type PathChange struct {
	Full    *string
	Prefix  string // the route's matched prefix, for Replace
	Replace *string
}

func (p PathChange) apply(path string) string {
	switch {
	case p.Full != nil:
		return *p.Full
	case p.Replace != nil:
		rest := strings.TrimPrefix(path, strings.TrimRight(p.Prefix, "/"))
		repl := strings.TrimRight(*p.Replace, "/")
		if rest == "" || rest == "/" {
			if repl == "" {
				return "/"
			}
			return repl + rest
		}
		return repl + rest
	}
	return path
}

// Redirect answers with a redirect (RequestRedirect); nil fields keep the
// request's value.
type Redirect struct {
	Scheme   *string
	Hostname *string
	Port     *int
	Path     PathChange
	Code     int // 301 or 302 (default 302)
}

// Handler is the redirect's handler.
func (d Redirect) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		scheme := "http"
		if p := req.Header.Get("X-Forwarded-Proto"); p != "" {
			scheme = p
		}
		host := req.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		port := ""
		if d.Scheme != nil {
			scheme = *d.Scheme
		}
		if d.Hostname != nil {
			host = *d.Hostname
		}
		if d.Port != nil && (scheme != "http" || *d.Port != 80) && (scheme != "https" || *d.Port != 443) {
			port = ":" + strconv.Itoa(*d.Port)
		}
		u := *req.URL
		u.Scheme, u.Host = scheme, host+port
		u.Path, u.RawPath = d.Path.apply(req.URL.Path), ""
		code := d.Code
		if code == 0 {
			code = http.StatusFound
		}
		http.Redirect(w, req, u.String(), code)
	})
}

// Rewrite changes the request's host and path before next sees them
// (URLRewrite).
type Rewrite struct {
	Hostname *string
	Path     PathChange
}

// Wrap returns next behind the rewrite.
func (rw Rewrite) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		req = req.Clone(req.Context())
		if rw.Hostname != nil {
			req.Host = *rw.Hostname
		}
		if rw.Path.Full != nil || rw.Path.Replace != nil {
			req.URL.Path = rw.Path.apply(req.URL.Path)
			req.URL.RawPath = ""
		}
		next.ServeHTTP(w, req)
	})
}

// Backend is one weighted backend of a rule.
type Backend struct {
	Handler http.Handler
	Weight  int
}

// Weighted sends each request to one backend, picked at random in
// proportion to its weight. Backends of weight 0 get nothing; when every
// weight is 0 the rule answers 500, as the Gateway API asks.
func Weighted(backends []Backend) http.Handler { return weighted(backends, rand.IntN) }

func weighted(backends []Backend, intn func(int) int) http.Handler {
	var live []Backend
	total := 0
	for _, b := range backends {
		if b.Weight > 0 {
			live = append(live, b)
			total += b.Weight
		}
	}
	switch len(live) {
	case 0:
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("X-Tuna-Error", "no-backend")
			http.Error(w, "tuna: every backend of this HTTPRoute rule has weight 0", http.StatusInternalServerError)
		})
	case 1:
		return live[0].Handler
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n := intn(total)
		for _, b := range live {
			if n < b.Weight {
				b.Handler.ServeHTTP(w, req)
				return
			}
			n -= b.Weight
		}
		panic(fmt.Sprintf("router: weighted pick %d out of range", n))
	})
}
