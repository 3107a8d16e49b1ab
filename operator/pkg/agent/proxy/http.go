// Package proxy carries public traffic that arrives over a tunnel to the
// upstream Service: an HTTP reverse proxy for http tunnels and a byte pipe
// for tcp tunnels. The upstream address is swapped atomically, so a changed
// Service port takes effect on the next request without a reconnect and
// without a lock on the request path.
package proxy

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync/atomic"
	"time"
)

// Upstream is where traffic goes: the address to dial and how to describe it.
type Upstream struct {
	// Scheme is http, https or h2c (cleartext HTTP/2; http tunnels) or tcp.
	Scheme string
	// Addr is the host:port to dial (a ClusterIP and port).
	Addr string
	// Display is what the user wrote, for error messages ("web:8080").
	Display string
}

// transport is shared by every tunnel: connections are pooled per upstream
// address anyway, and one pool for a thousand tunnels costs far less memory
// than a thousand pools.
var transport = &http.Transport{
	Proxy:               nil, // never an environment proxy: dial the Service itself
	DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	MaxIdleConns:        1024,
	MaxIdleConnsPerHost: 64,
	IdleConnTimeout:     90 * time.Second,
	// No response header timeout: long polls and streams are the
	// backend's business.
}

// HTTP is a reverse proxy to a swappable upstream.
type HTTP struct {
	upstream atomic.Pointer[Upstream]
	proxy    *httputil.ReverseProxy
	handler  http.Handler
}

// NewHTTP returns a proxy to u; meter may be nil.
func NewHTTP(u Upstream, meter Meter) *HTTP {
	h := &HTTP{}
	h.upstream.Store(&u)
	h.proxy = &httputil.ReverseProxy{
		Rewrite:       h.rewrite,
		Transport:     byScheme{},
		FlushInterval: -1, // stream responses (SSE, chunked) as they come
		ErrorHandler:  h.fail,
		// A response with trailers (gRPC's grpc-status) must not go out
		// with a Content-Length: HTTP/1.1 carries trailers only in a
		// chunked body. An HTTP/2 upstream may send both.
		ModifyResponse: func(res *http.Response) error {
			if len(res.Trailer) > 0 {
				res.Header.Del("Content-Length")
				res.ContentLength = -1
			}
			return nil
		},
	}
	h.handler = metered(h.proxy, meter)
	return h
}

// SetUpstream switches later requests to u.
func (h *HTTP) SetUpstream(u Upstream) { h.upstream.Store(&u) }

// Upstream returns the current upstream.
func (h *HTTP) Upstream() Upstream { return *h.upstream.Load() }

func (h *HTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.handler.ServeHTTP(w, r) }

// rewrite sends the request to the upstream with the public Host header. The
// edge has set X-Forwarded-For/Host/Proto from what it saw (and overwrote any
// a client sent); ReverseProxy strips them from the outgoing request when
// Rewrite is used, so they are carried over here unchanged.
func (h *HTTP) rewrite(pr *httputil.ProxyRequest) {
	u := h.upstream.Load()
	pr.Out.URL.Scheme = u.Scheme
	pr.Out.URL.Host = u.Addr
	pr.Out.Host = pr.In.Host
	for _, k := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		if v := pr.In.Header.Values(k); len(v) > 0 {
			pr.Out.Header[k] = v
		}
	}
}

// fail answers 502 with a message that names the upstream and the cause;
// the tunnel itself stays up.
func (h *HTTP) fail(w http.ResponseWriter, r *http.Request, err error) {
	u := h.upstream.Load()
	cause := err.Error()
	switch {
	case strings.Contains(cause, "connection refused"):
		cause = "connection refused: is the Service's backend running?"
	case strings.Contains(cause, "timeout"):
		cause = "timed out"
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Tuna-Error", "upstream-unavailable")
	w.WriteHeader(http.StatusBadGateway)
	fmt.Fprintf(w, "tuna: upstream %s (%s) is not answering: %s\n", u.Display, u.Addr, cause)
}
