package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

// Benchmarks of the public listener against a store of many tunnel keys.
// Reproduce (figures in docs/benchmarks.md):
//
//	go test -run '^$' -bench 'UnknownHost|RoutedUnderFlood' -benchtime 5s ./edge/server/

// storeKeys creates n http tunnel keys through the API, each limited to its
// own host, as an edge serving n tunnels holds them.
func storeKeys(b *testing.B, e *testEdge, n int) {
	b.Helper()
	api := e.client(e.writeKey)
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			_, err := api.CreateTunnelKey(context.Background(), client.CreateTunnelKey{
				Protocol: "http", Address: fmt.Sprintf("k%d", i),
			})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatalf("creating %d tunnel keys: %v", n, err)
	}
}

// publicClient is one HTTP client of the public listener with its own
// keep-alive pool.
type publicClient struct {
	hc   *http.Client
	base string
}

func newPublicClient(e *testEdge) *publicClient {
	return &publicClient{base: "http://" + e.HTTPAddr() + "/", hc: &http.Client{
		Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64},
	}}
}

// status sends GET / for host. The URL names the listener and only the Host
// header changes, so the transport reuses connections across hosts.
func (c *publicClient) status(host string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, c.base, nil)
	if err != nil {
		return 0, err
	}
	req.Host = host
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// BenchmarkUnknownHost: requests for hosts nobody serves (404), with 1 and
// with 2,001 tunnel keys in the store. The cost must not depend on the keys.
func BenchmarkUnknownHost(b *testing.B) {
	for _, keys := range []int{1, 2001} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			e := startEdge(b, b.TempDir())
			storeKeys(b, e, keys)
			pc := newPublicClient(e)
			var seq atomic.Int64
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					host := fmt.Sprintf("nobody-%d.%s", seq.Add(1), baseDomain)
					if code, err := pc.status(host); err != nil || code != http.StatusNotFound {
						b.Errorf("GET %s: %d, %v; want 404", host, code, err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}

// BenchmarkRoutedUnderFlood: routed requests through a tunnel with 2,000
// tunnel keys in the store, without ("quiet", the baseline) and with a
// second client flooding unknown hosts at a fixed rate. 300/s is about what
// saturated a 2,001-key edge on its own when each such request decoded
// every key; 1000/s is more than three times that. The flood is throttled
// because an unthrottled one would measure how two cores are shared between
// two clients, not what an unknown host costs.
func BenchmarkRoutedUnderFlood(b *testing.B) {
	e := startEdge(b, b.TempDir())
	storeKeys(b, e, 1999)
	tk := e.tunnelKey(b, client.CreateTunnelKey{Protocol: "http", Address: "routed"})
	s := e.mustDial(b, tk.Key)
	bind(b, s, protocol.BindRequest{Protocol: "http"})
	serveHTTP(b, s, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	routed := "routed." + baseDomain

	var quiet float64 // routed req/s of the quiet run, the baseline
	for _, flood := range []int{0, 300, 1000} {
		name := "quiet"
		if flood > 0 {
			name = fmt.Sprintf("flood=%d/s", flood)
		}
		b.Run(name, func(b *testing.B) {
			pc := newPublicClient(e)
			var flooded atomic.Int64
			start := time.Now()
			if flood > 0 {
				stop := startFlood(b, e, flood, &flooded)
				defer stop()
			}
			b.SetParallelism(2)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if code, err := pc.status(routed); err != nil || code != http.StatusOK {
						b.Errorf("GET %s: %d, %v; want 200", routed, code, err)
						return
					}
				}
			})
			got := float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(got, "req/s")
			if flood == 0 {
				quiet = got
				return
			}
			b.ReportMetric(float64(flooded.Load())/time.Since(start).Seconds(), "flood-req/s")
			if quiet > 0 {
				b.ReportMetric(100*got/quiet, "%-of-quiet")
			}
		})
	}
}

// startFlood sends unknown-host requests at perSecond from its own client
// until the returned stop is called; each 404 counts in n.
func startFlood(b *testing.B, e *testEdge, perSecond int, n *atomic.Int64) (stop func()) {
	pc := newPublicClient(e)
	lim := rate.NewLimiter(rate.Limit(perSecond), max(1, perSecond/100))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var seq atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lim.Wait(ctx) == nil {
				code, err := pc.status(fmt.Sprintf("flood-%d.%s", seq.Add(1), baseDomain))
				if ctx.Err() != nil {
					return
				}
				if err != nil || code != http.StatusNotFound {
					b.Errorf("flood: %d, %v; want 404", code, err)
					return
				}
				n.Add(1)
			}
		}()
	}
	return func() { cancel(); wg.Wait() }
}
