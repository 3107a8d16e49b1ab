package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/apikey"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
)

// faultProxy is a fault-injecting reverse proxy in front of the real edge's
// control API. The edge is real; the failures are injected here, because a
// real edge does not answer 5xx, 429 or 403 on demand. It counts requests
// by operation ("GET /v1/tunnel-keys"), failed or passed.
type faultProxy struct {
	*httptest.Server
	failed atomic.Int32

	mu    sync.Mutex
	rule  *faultRule
	calls map[string]int
	// paths counts requests by method and exact path
	// ("DELETE /v1/tunnel-keys/k_123").
	paths map[string]int
	// keys counts requests by the public id of the API key they carry.
	keys map[string]int
}

// faultRule answers matching requests with an API error.
type faultRule struct {
	match      func(*http.Request) bool
	status     int
	code       string
	retryAfter string
}

// newFaultProxy starts a proxy to the current edge, passing everything
// through until told to fail.
func newFaultProxy(t *testing.T) *faultProxy {
	t.Helper()
	target, err := url.Parse(env.Edge.APIURL())
	require.NoError(t, err)
	upstream := httputil.NewSingleHostReverseProxy(target)
	// The proxy pins the edge's certificate, and the controller pins the
	// proxy's: TLS on both hops, as in production.
	pinned, err := env.Edge.Trust().Transport()
	require.NoError(t, err)
	upstream.Transport = pinned
	p := &faultProxy{calls: map[string]int{}, paths: map[string]int{}, keys: map[string]int{}}
	p.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.calls[r.Method+" "+edgeapi.Route(r.URL.Path)]++
		p.paths[r.Method+" "+r.URL.Path]++
		p.keys[apikey.ID(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))]++
		rule := p.rule
		p.mu.Unlock()
		if rule != nil && rule.match(r) {
			p.failed.Add(1)
			if rule.retryAfter != "" {
				w.Header().Set("Retry-After", rule.retryAfter)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(rule.status)
			fmt.Fprintf(w, `{"code":%q,"error":"injected failure","request_id":"fault-proxy"}`, rule.code)
			return
		}
		upstream.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// fail makes matching requests fail from now on (replacing any rule).
func (p *faultProxy) fail(rule faultRule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rule = &rule
}

// heal passes every request through again.
func (p *faultProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rule = nil
}

// seen is how many requests of op ("POST /v1/tunnel-keys") arrived.
func (p *faultProxy) seen(op string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[op]
}

// seenPath is how many requests of one method and exact path arrived
// ("DELETE /v1/tunnel-keys/k_123"): what a test's own objects caused, apart
// from the calls the shared controller makes for other tests' leftovers.
func (p *faultProxy) seenPath(op string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paths[op]
}

// seenKey is how many requests carried the API key with this public id.
func (p *faultProxy) seenKey(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keys[id]
}

// everything matches every API request.
func everything(*http.Request) bool { return true }

// request matches one method on paths under prefix.
func request(method, prefix string) func(*http.Request) bool {
	return func(r *http.Request) bool { return r.Method == method && strings.HasPrefix(r.URL.Path, prefix) }
}

// controllerBehind restarts the controller against p, with other options
// if given, and puts the usual one back when the test ends.
func controllerBehind(t *testing.T, p *faultProxy, mutate ...func(*app.ControllerOptions)) {
	t.Helper()
	restartController(t, append([]func(*app.ControllerOptions){func(o *app.ControllerOptions) {
		o.EdgeAPIURL, o.EdgeAPIFingerprint = p.URL, apiwire.Fingerprint(p.Certificate().Raw)
	}}, mutate...)...)
}

// restartController restarts the shared controller with other options (or
// starts it, after stopController), and puts the usual one back when the
// test ends.
func restartController(t *testing.T, mutate ...func(*app.ControllerOptions)) {
	t.Helper()
	if env.Controller != nil {
		require.NoError(t, env.Controller.Stop())
	}
	env.Controller = startController(mutate...)
	t.Cleanup(func() {
		require.NoError(t, env.Controller.Stop())
		env.Controller = startController()
	})
}

// stopController stops the shared controller; the usual one is started
// again when the test ends, unless restartController already did.
func stopController(t *testing.T) {
	t.Helper()
	require.NoError(t, env.Controller.Stop())
	env.Controller = nil
	t.Cleanup(func() {
		if env.Controller == nil {
			env.Controller = startController()
		}
	})
}
