// Package proxy carries public traffic that arrives over a tunnel to the
// upstream Service: an HTTP reverse proxy for http tunnels and a byte pipe
// for tcp tunnels. The upstream address is swapped atomically, so a changed
// Service port takes effect on the next request without a reconnect and
// without a lock on the request path.
package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"code.tuna.am/tuna/k8s-operator/internal/bufpool"
	"code.tuna.am/tuna/k8s-operator/internal/h1"
	"code.tuna.am/tuna/k8s-operator/internal/httpfwd"
)

// Upstream is where traffic goes: the address to dial and how to describe it.
type Upstream struct {
	// Scheme is http, https or h2c (cleartext HTTP/2; http tunnels) or tcp.
	Scheme string
	// Addr is the host:port to dial (a ClusterIP and port).
	Addr string
	// Display is what the user wrote, for error messages ("web:8080").
	Display string
	// TLS checks an https upstream's certificate; nil: the system's roots
	// and the host of Addr.
	TLS *TLS
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
	current atomic.Pointer[target]
	handler http.Handler
	meter   Meter
}

// target is one upstream and the reverse proxy bound to it. A swap
// replaces both at once, so a request never mixes the address of one
// upstream with the TLS settings of another, and the request path reads
// one pointer, never a lock.
type target struct {
	up    Upstream
	proxy *httputil.ReverseProxy
	// relay is how the h1 relay forwards a plain request to up (an http
	// upstream only): made once per upstream, so the request path
	// allocates nothing for it.
	relay h1.Route
}

// NewHTTP returns a proxy to u; meter may be nil.
func NewHTTP(u Upstream, meter Meter) *HTTP {
	h := &HTTP{meter: meter}
	h.SetUpstream(u)
	h.handler = metered(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The edge writes a request's body beside reading its answer, so
		// the answer may begin while the body still streams (gRPC bidi,
		// an upload echoed as it comes): net/http's HTTP/1.1 server would
		// otherwise read the rest of the body before it sends the answer's
		// head, and a stream whose next message waits for that answer
		// would hang.
		_ = http.NewResponseController(w).EnableFullDuplex()
		r, cancel := grpcDeadline(r)
		defer cancel()
		t := h.current.Load()
		if idle, ok := t.pinnable(r); ok {
			t.forward(w, r, idle)
			return
		}
		t.proxy.ServeHTTP(streamedHead{w}, r)
	}), meter)
	return h
}

// SetUpstream switches later requests to u.
func (h *HTTP) SetUpstream(u Upstream) {
	t := &target{up: u}
	t.proxy = &httputil.ReverseProxy{
		Rewrite:       t.rewrite,
		Transport:     roundTripper(u),
		FlushInterval: -1, // stream responses (SSE, chunked) as they come
		BufferPool:    bufpool.Shared,
		ErrorHandler:  t.fail,
		ModifyResponse: func(res *http.Response) error {
			trailersChunked(res)
			return nil
		},
	}
	t.relay = t.route(h.meter)
	h.current.Store(t)
}

// Upstream returns the current upstream.
func (h *HTTP) Upstream() Upstream { return h.current.Load().up }

func (h *HTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.handler.ServeHTTP(w, r) }

// roundTripper picks the transport of u: h2c upstreams through the
// cleartext HTTP/2 one, https upstreams with TLS settings through the
// shared transport of those settings, the rest through the shared
// HTTP/1.1 transport (which also carries WebSocket upgrades).
func roundTripper(u Upstream) http.RoundTripper {
	switch {
	case u.Scheme == SchemeH2C:
		return h2cRoundTripper{}
	case u.Scheme == "https" && u.TLS != nil:
		tr, err := transportFor(u.TLS)
		if err != nil {
			return failing{err}
		}
		return tr
	}
	return transport
}

// streamedHead sends the head of a streamed answer at once
// (httpfwd.WriteHead), which ReverseProxy holds back until the first
// piece of the body.
type streamedHead struct{ http.ResponseWriter }

func (w streamedHead) WriteHeader(code int) {
	length := int64(-1)
	if v := w.Header().Get("Content-Length"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			length = n
		}
	}
	httpfwd.WriteHead(w.ResponseWriter, code, length)
}

func (w streamedHead) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// failing answers every request with err: an upstream whose TLS settings
// cannot be used (the agent reports why in status before it gets here).
type failing struct{ err error }

func (f failing) RoundTrip(*http.Request) (*http.Response, error) { return nil, f.err }

// rewrite sends the request to the upstream with the public Host header. The
// edge has set X-Forwarded-For/Host/Proto from what it saw (and overwrote any
// a client sent); ReverseProxy strips them from the outgoing request when
// Rewrite is used, so they are carried over here unchanged.
func (t *target) rewrite(pr *httputil.ProxyRequest) {
	pr.Out.URL.Scheme = t.up.Scheme
	pr.Out.URL.Host = t.up.Addr
	pr.Out.Host = pr.In.Host
	httpfwd.ForwardTrailers(pr.In, pr.Out)
	for _, k := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		if v := pr.In.Header.Values(k); len(v) > 0 {
			pr.Out.Header[k] = v
		}
	}
}

// fail answers 502 with a message that names the upstream and the cause;
// the tunnel itself stays up.
func (t *target) fail(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := t.failure(err)
	if isGRPC(r) {
		grpcFail(w, r, code, msg)
		return
	}
	status := http.StatusBadGateway
	if errors.Is(err, httpfwd.ErrRequestBody) {
		// The request's own body failed (the edge's channel closed
		// mid-body): not the upstream's fault.
		code, msg, status = "request-body", "tuna: "+err.Error()+"\n", http.StatusBadRequest
		w.Header().Set("Connection", "close")
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Tuna-Error", code)
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg)
}

// failure is the X-Tuna-Error code and the text of a 502 for err.
func (t *target) failure(err error) (code, msg string) {
	u := t.up
	cause, code, what := err.Error(), "upstream-unavailable", "is not answering"
	if m, ok := tlsFailure(err); ok && u.Scheme == "https" {
		cause, code, what = m, "upstream-tls", "fails the TLS check"
	} else {
		switch {
		case strings.Contains(cause, "connection refused"):
			cause = "connection refused: is the Service's backend running?"
		case strings.Contains(cause, "timeout"):
			cause = "timed out"
		}
	}
	return code, fmt.Sprintf("tuna: upstream %s (%s) %s: %s\n", u.Display, u.Addr, what, cause)
}

// trailersChunked makes a response with trailers (gRPC's grpc-status) go
// out without a Content-Length: HTTP/1.1 carries trailers only in a
// chunked body. An HTTP/2 upstream may send both.
func trailersChunked(res *http.Response) {
	grpcStatusToTrailers(res)
	if len(res.Trailer) > 0 {
		res.Header.Del("Content-Length")
		res.ContentLength = -1
	}
}
