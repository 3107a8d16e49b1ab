// Package public is the edge's public HTTP(S) side: it routes each request
// by Host to the tunnel session bound to that host and forwards it over an
// SSH channel pinned to the public connection. HTTP/1.1 runs inside the
// channel; WebSocket upgrades pass through ReverseProxy; clients may speak
// HTTP/2 to the edge over TLS, whose streams go in frames to the agents
// that serve them (frames.go).
package public

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"sync/atomic"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/internal/access"
	"code.tuna.am/tuna/k8s-operator/edge/internal/names"
	"code.tuna.am/tuna/k8s-operator/edge/internal/registry"
	"code.tuna.am/tuna/k8s-operator/edge/metrics"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/internal/bufpool"
	"code.tuna.am/tuna/k8s-operator/internal/httpfwd"
)

// KnownHost reports whether a host that has no live route is nevertheless
// ours (reserved, or named by an unrevoked tunnel key): it decides between
// "no such tunnel" (404) and "tunnel not connected" (502).
type KnownHost func(host string) bool

// Handler is the public HTTP handler.
type Handler struct {
	reg   *registry.Registry
	known KnownHost
	t     Timeouts
	m     *metrics.Metrics
	log   *slog.Logger
	proxy *httputil.ReverseProxy
	// maxConns caps each host's requests in flight (0: no limit).
	maxConns int
	// access enforces the access policies of the addresses that have one.
	access *access.Engine
}

// UseAccess makes e decide the requests to addresses an access policy
// guards. Without it they are refused (a policy not in force).
func (h *Handler) UseAccess(e *access.Engine) { h.access = e }

// openTimeout bounds the wait for the agent to accept a channel.
const openTimeout = 30 * time.Second

type ctxKey int

const (
	keyConn ctxKey = iota
	keyRoute
)

// connState is per public connection: the channels it opens carry this
// client's address, and are reused only by this client, for the host they
// were opened for. Plain requests keep theirs in idle (internal/httpfwd);
// upgrades go through ReverseProxy and tr, a Transport of the connection's
// own.
type connState struct {
	remote string
	scheme string
	// bound is the address of a Gateway address listener (AddressServer):
	// its requests go to the tunnel bound to that address, whatever their
	// Host. "" on the shared listeners, which route by Host.
	bound string
	idle  httpfwd.Idle
	// frames are an HTTP/2 connection's idle framed channels (frames.go);
	// noFrames is set once its tunnel's agent answered without frames.
	frames   framedIdle
	noFrames atomic.Bool

	once sync.Once
	tr   *http.Transport
}

// closeIdle runs when the public connection closes.
func (cs *connState) closeIdle() {
	cs.idle.Close()
	cs.frames.close()
	if cs.tr != nil {
		cs.tr.CloseIdleConnections()
	}
}

// New returns the handler; zero timeouts take the defaults of Timeouts.
// maxConns caps the requests in flight to one bound host (WebSockets count
// while open); 0 means no limit.
func New(reg *registry.Registry, known KnownHost, t Timeouts, m *metrics.Metrics, maxConns int, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{reg: reg, known: known, t: t.withDefaults(), m: m, maxConns: maxConns, log: log.With("component", "public")}
	h.proxy = &httputil.ReverseProxy{
		Rewrite:      h.rewrite,
		Transport:    roundTripper{h},
		ErrorHandler: h.proxyError,
		// Flush at once: streaming responses (SSE, long polls) must not
		// wait for a buffer to fill.
		FlushInterval: -1,
		BufferPool:    bufpool.Shared,
	}
	return h
}

// Server builds an http.Server for a public listener of the given scheme.
func (h *Handler) Server(scheme string) *http.Server { return h.server(scheme, "") }

// AddressServer builds the http.Server of a Gateway address, for scheme
// "http" or "https" (TLS ended by the caller's listener): every request
// it takes goes to the tunnel bound to addr (an IP address of the edge),
// with its Host as the client sent it.
func (h *Handler) AddressServer(scheme, addr string) *http.Server { return h.server(scheme, addr) }

func (h *Handler) server(scheme, bound string) *http.Server {
	var mu sync.Mutex
	states := map[net.Conn]*connState{}
	return &http.Server{
		Handler: h,
		// No ReadTimeout or WriteTimeout here: see Timeouts.
		ReadHeaderTimeout: h.t.ReadHeader,
		IdleTimeout:       h.t.Idle,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			cs := &connState{remote: c.RemoteAddr().String(), scheme: scheme, bound: bound}
			mu.Lock()
			states[c] = cs
			mu.Unlock()
			return context.WithValue(ctx, keyConn, cs)
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			if st != http.StateClosed && st != http.StateHijacked {
				return
			}
			mu.Lock()
			cs := states[c]
			delete(states, c)
			mu.Unlock()
			if cs != nil {
				cs.closeIdle()
			}
		},
		ErrorLog: slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
	}
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rw := &statusWriter{ResponseWriter: w}
	h.serve(rw, r)
	h.m.HTTPRequest(rw.status())
}

// routeKey is what a request is routed by: its host, or the address of
// the Gateway address listener it came in on.
func routeKey(cs *connState, host string) string {
	if cs != nil && cs.bound != "" {
		return cs.bound
	}
	return names.Normalize(host)
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	cs, _ := r.Context().Value(keyConn).(*connState)
	host := routeKey(cs, r.Host)
	rt, offline := h.route(host)
	if rt == nil {
		h.limitLocal(w)
		if offline != "" {
			http.Error(w, fmt.Sprintf("tuna-edge: the tunnel for %s is not connected", offline), http.StatusBadGateway)
			return
		}
		http.Error(w, fmt.Sprintf("tuna-edge: no tunnel is bound to host %q", host), http.StatusNotFound)
		return
	}
	if cs == nil { // handler used outside Server(): one channel per request
		cs = &connState{remote: r.RemoteAddr, scheme: "http"}
		if r.TLS != nil {
			cs.scheme = "https"
		}
		defer cs.closeIdle()
	}
	if !rt.Pool.ACL().AllowedAddr(cs.remote) {
		h.limitLocal(w)
		http.Error(w, "tuna-edge: your address is not allowed to reach this tunnel", http.StatusForbidden)
		return
	}
	dropEdgeFields(r.Header)
	if id := rt.Pool.AccessPolicy(); id != "" {
		var pass bool
		if w, pass = h.access.Serve(w, r, id, cs.remote, cs.scheme == "https", func() { h.limitLocal(w) }); !pass {
			return
		}
	}
	if !rt.Pool.Conns.Take(h.maxConns) {
		h.m.LimitRefused(metrics.LimitConnectionsPerTunnel)
		limitExceeded(w, &registry.LimitError{Limit: metrics.LimitConnectionsPerTunnel, Value: h.maxConns,
			What: fmt.Sprintf("the tunnel for %s has too many requests in flight; retry later", host)})
		return
	}
	h.m.InFlight(1)
	defer func() {
		rt.Pool.Conns.Put()
		h.m.InFlight(-1)
	}()
	h.m.PublicConnection(protocol.ProtocolHTTP)
	if !httpfwd.IsUpgrade(r) {
		if r.ProtoMajor == 2 {
			h.forwardFramed(w, r, cs, rt)
			return
		}
		h.forward(w, r, cs, rt)
		return
	}
	ctx := context.WithValue(r.Context(), keyRoute, rt)
	ctx = context.WithValue(ctx, keyConn, cs)
	h.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// route is the route of host, its own or a wildcard's (registry.Resolve),
// or the held name that stops the walk while it is not connected.
func (h *Handler) route(host string) (*registry.Route, string) {
	return h.reg.Resolve(host, h.known)
}

// rewrite prepares an upgrade request for ReverseProxy, with the same
// forwarding headers as a plain request's (setForwarded).
func (h *Handler) rewrite(pr *httputil.ProxyRequest) {
	cs, _ := pr.In.Context().Value(keyConn).(*connState)
	pr.Out.URL.Scheme = "http"
	pr.Out.URL.Host = names.Normalize(pr.In.Host)
	pr.Out.Host = pr.In.Host
	setForwarded(pr.Out.Header, pr.In.Host, cs)
}

// limitExceeded answers 503: the tunnel is there, but busy. Retry-After
// tells clients and proxies that a retry may work.
func limitExceeded(w http.ResponseWriter, err *registry.LimitError) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, "tuna-edge: "+err.Error(), http.StatusServiceUnavailable)
}

func (h *Handler) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	h.log.Debug("proxying through tunnel failed", "err", err)
	if errors.Is(err, httpfwd.ErrRequestBody) {
		// The client broke its body's framing or left: the connection
		// cannot carry another request.
		w.Header().Set("Connection", "close")
		http.Error(w, "tuna-edge: "+err.Error(), http.StatusBadRequest)
		return
	}
	code, msg, retry := failure(err)
	if retry {
		w.Header().Set("Retry-After", "1")
	}
	http.Error(w, msg, code)
}

// failure is the answer to a request the tunnel did not take: 503 with
// Retry-After for a limit, else 502.
func failure(err error) (code int, msg string, retryAfter bool) {
	var le *registry.LimitError
	if errors.As(err, &le) {
		return http.StatusServiceUnavailable, "tuna-edge: " + le.Error(), true
	}
	return http.StatusBadGateway, "tuna-edge: the tunnel did not answer: " + err.Error(), false
}

// forward sends a plain request on a channel pinned to the public
// connection (internal/httpfwd), opened on the pool's pick.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, cs *connState, rt *registry.Route) {
	h.forwardOn(w, r, h.outgoing(w, r, cs), cs, rt, nil)
}

// outgoing is r as the tunnel gets it, in frames or in HTTP/1.1: the
// rulebook's hop-by-hop fields out, the edge's forwarding fields in, a
// body whose stalls are bounded.
func (h *Handler) outgoing(w http.ResponseWriter, r *http.Request, cs *connState) *http.Request {
	out := httpfwd.Outgoing(r)
	setForwarded(out.Header, r.Host, cs)
	if out.Body != nil && h.t.Body > 0 {
		out.Body = stallGuard{ReadCloser: out.Body, rc: http.NewResponseController(w), d: h.t.Body}
	}
	return out
}

// forwardOn sends out, made from r, as HTTP/1.1 on a kept channel, or on
// first (a channel already open for it) or a new one.
func (h *Handler) forwardOn(w http.ResponseWriter, r *http.Request, out *http.Request, cs *connState, rt *registry.Route, first net.Conn) {
	host := routeKey(cs, r.Host)
	defer func() {
		if first != nil { // a kept channel carried the request
			_ = first.Close()
		}
	}()
	dial := func(ctx context.Context) (net.Conn, error) {
		if c := first; c != nil {
			first = nil
			return c, nil
		}
		c, err := h.open(ctx, rt, protocol.ForwardInfo{RemoteAddr: cs.remote, Host: host, Scheme: cs.scheme})
		if err != nil {
			return nil, err
		}
		return metrics.TunnelConn{Conn: c, M: h.m}, nil
	}
	if r.ProtoMajor == 2 {
		cs.idle.Keep(h2IdleChannels)
	}
	if err := httpfwd.Forward(w, out, &cs.idle, host, dial, nil); err != nil {
		h.proxyError(w, r, err)
	}
}

// h2IdleChannels is how many idle channels an HTTP/2 connection keeps for
// its streams: as many as a client commonly runs at once.
const h2IdleChannels = 16

// stallGuard bounds each wait for more of a request body, as the relay's
// BodyTimeout does: a client that stalls mid-upload longer than d is cut
// off, and its tunnel's slot freed.
type stallGuard struct {
	io.ReadCloser
	rc *http.ResponseController
	d  time.Duration
}

func (b stallGuard) Read(p []byte) (int, error) {
	_ = b.rc.SetReadDeadline(time.Now().Add(b.d))
	return b.ReadCloser.Read(p)
}

// roundTripper picks the per-connection transport; it exists because
// ReverseProxy takes one Transport for all requests.
type roundTripper struct{ h *Handler }

func (rt roundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	route, _ := r.Context().Value(keyRoute).(*registry.Route)
	if route == nil {
		return nil, fmt.Errorf("no route in request context")
	}
	cs, _ := r.Context().Value(keyConn).(*connState)
	if cs == nil {
		return nil, fmt.Errorf("no connection in request context")
	}
	cs.once.Do(func() { cs.tr = rt.h.newTransport(cs) })
	// No retry here: an upgrade's request reached the agent or not, and
	// only the second would be safe to send again (httprule.Replay), which
	// the Transport does not tell. A channel that cannot be opened is
	// retried on the pool's next session by registry.Pool.Open.
	return cs.tr.RoundTrip(r)
}

// newTransport dials by opening a forward channel on the session of the
// host's pool that registry.Pool.Open picks at dial time. Pooled channels
// belong to one session; when it ends they close and the transport dials
// afresh, on another session of the pool.
func (h *Handler) newTransport(cs *connState) *http.Transport {
	return &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			// An agent that stops accepting must not hold the client forever.
			ctx, cancel := context.WithTimeout(ctx, openTimeout)
			defer cancel()
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				host = addr
			}
			host = routeKey(cs, host)
			rt, _ := h.route(host)
			if rt == nil {
				return nil, fmt.Errorf("the tunnel for %s is not connected", host)
			}
			c, err := rt.Pool.Open(ctx, protocol.ForwardInfo{
				RemoteAddr: cs.remote, Host: host, Scheme: cs.scheme,
			})
			if err != nil {
				return nil, err
			}
			return metrics.TunnelConn{Conn: c, M: h.m}, nil
		},
		DisableCompression: true,
		// Only upgrades come here, and each needs a channel of its own;
		// an answer that does not upgrade ends its channel, so no idle
		// channel waits here for a draining session to take back.
		DisableKeepAlives: true,
		ForceAttemptHTTP2: false,
	}
}

// statusWriter records the status for metrics and keeps the interfaces
// ReverseProxy needs (Flush, Hijack for upgrades) via Unwrap.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}
