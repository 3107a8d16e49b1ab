package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/metrics"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// load sends GETs through the edge from a few workers until stopped or
// until its budget of requests is spent, and counts what failed: a
// transport error or any status but 200.
type load struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	failures   []string
	stop       chan struct{}
	stopOnce   sync.Once
	wg         sync.WaitGroup
}

func startLoad(host string, paths []string, workers int, budget int64) *load {
	l := &load{stop: make(chan struct{})}
	addr := env.Edge.HTTPAddr()
	var sent atomic.Int64
	for w := range workers {
		// Half the workers keep their public connection (its channel to
		// the agent lives across route changes), half open one per request.
		tr := &http.Transport{Proxy: nil, DisableKeepAlives: w%2 == 1,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}}
		c := &http.Client{Timeout: 10 * time.Second, Transport: tr}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer tr.CloseIdleConnections()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				if sent.Add(1) > budget {
					return
				}
				url := hostURL(host) + paths[(w+i)%len(paths)]
				resp, err := c.Get(url)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					l.failed.Add(1)
					l.mu.Lock()
					if len(l.failures) < 10 {
						l.failures = append(l.failures, url+": "+err.Error())
					}
					l.mu.Unlock()
					continue
				}
				l.ok.Add(1)
			}
		}()
	}
	return l
}

func (l *load) finish() {
	l.stopOnce.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// backendOf fetches url once and returns which echo backend answered.
func backendOf(url string) string {
	resp, err := publicClient().Get(url)
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	var e harness.Echo
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&e) != nil {
		return fmt.Sprintf("status %d", resp.StatusCode)
	}
	return e.Backend
}

// Route changes under continuous load: paths added and removed and
// backends switched, five times, while workers send requests through the
// edge. Every request succeeds, each change is served within a second
// (R4), and the tunnel keeps its key and its edge session throughout: no
// reconnect.
func TestIngressLiveRouteUpdateUnderLoad(t *testing.T) {
	ctx := context.Background()
	ensureTunaClass(t)
	ns := namespace(t)
	for _, svc := range []string{"a", "b", "c"} {
		echoService(t, ns, svc, harness.ServicePort{Port: 8080})
	}
	host := reserve(t, ns, "live")
	require.NoError(t, env.CP.Client.Create(ctx, tunaIngress(ns, "live", rule(host,
		ingPath{prefix, "/", "a", 8080},
		ingPath{prefix, "/api", "b", 8080},
	))))
	waitBackend(t, hostURL(host)+"/", "a-8080")
	waitBackend(t, hostURL(host)+"/api", "b-8080")
	before := liveKey(t, host)
	updatesBefore := testutil.ToFloat64(metrics.IngressRouteUpdates.WithLabelValues(host))

	// At most 20,000 requests; the updates below take a few seconds.
	l := startLoad(host, []string{"/", "/api/x", "/new/y"}, 4, 20000)
	defer l.finish()
	require.Eventually(t, func() bool { return l.ok.Load() >= 50 }, wait, 10*time.Millisecond, "the load runs")

	paths := func(ps ...ingPath) func(*networkingv1.Ingress) {
		return func(ing *networkingv1.Ingress) { ing.Spec.Rules = []networkingv1.IngressRule{rule(host, ps...)} }
	}
	steps := []struct {
		name        string
		change      func(*networkingv1.Ingress)
		probe, want string
	}{
		{"add /new", paths(ingPath{prefix, "/", "a", 8080}, ingPath{prefix, "/api", "b", 8080}, ingPath{prefix, "/new", "c", 8080}), "/new/y", "c-8080"},
		{"switch / to c", paths(ingPath{prefix, "/", "c", 8080}, ingPath{prefix, "/api", "b", 8080}, ingPath{prefix, "/new", "c", 8080}), "/", "c-8080"},
		{"switch /api to a", paths(ingPath{prefix, "/", "c", 8080}, ingPath{prefix, "/api", "a", 8080}, ingPath{prefix, "/new", "c", 8080}), "/api/x", "a-8080"},
		{"remove /new, / to b", paths(ingPath{prefix, "/", "b", 8080}, ingPath{prefix, "/api", "a", 8080}), "/new/y", "b-8080"},
		{"back to the start", paths(ingPath{prefix, "/", "a", 8080}, ingPath{prefix, "/api", "b", 8080}), "/api/x", "b-8080"},
	}
	for _, s := range steps {
		// Let the load run on the current table before changing it.
		mark := l.ok.Load()
		require.Eventually(t, func() bool { return l.ok.Load() >= mark+50 }, wait, 5*time.Millisecond)
		start := time.Now()
		updateIngress(t, ns, "live", s.change)
		require.Eventually(t, func() bool { return backendOf(hostURL(host)+s.probe) == s.want }, wait, 5*time.Millisecond,
			"%s: %s never served by %s", s.name, s.probe, s.want)
		took := time.Since(start)
		t.Logf("%s: served after %v", s.name, took)
		assert.Less(t, took, time.Second, "%s: a route change takes effect within a second", s.name)
	}
	mark := l.ok.Load()
	require.Eventually(t, func() bool { return l.ok.Load() >= mark+50 }, wait, 5*time.Millisecond)
	l.finish()

	t.Logf("%d requests succeeded, %d failed", l.ok.Load(), l.failed.Load())
	assert.Zero(t, l.failed.Load(), "no request may fail during route changes: %v", l.failures)
	assert.GreaterOrEqual(t, l.ok.Load(), int64(50*(len(steps)+2)), "the load ran throughout")
	after := liveKey(t, host)
	assert.Equal(t, before.ID, after.ID, "the same key")
	assert.Equal(t, before.Session.ID, after.Session.ID, "the same edge session: route changes never reconnect")
	assert.Equal(t, before.Session.ConnectedAt, after.Session.ConnectedAt)
	assert.Equal(t, updatesBefore+float64(len(steps)), testutil.ToFloat64(metrics.IngressRouteUpdates.WithLabelValues(host)),
		"one route table swap per change")
	// One RoutesUpdated per route table: the first, and one per step (the
	// last step's table is the first one again, counted in that event's
	// series, which the recorder updates in the background).
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Len(c, ingressEvents(c, ns, "live")["RoutesUpdated"], 1+len(steps))
	}, wait, 50*time.Millisecond)
	events := ingressEvents(t, ns, "live")
	assert.Len(t, events["TunnelConnected"], 1, "connected once")
	assert.Empty(t, events["TunnelStopped"])
}
