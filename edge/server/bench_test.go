package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

// Benchmarks of the public listener against a store of many tunnel keys.
// Reproduce (figures in docs/benchmarks.md):
//
//	go test -run '^$' -bench UnknownHost -benchtime 5s -count 3 ./edge/server/
//	go test -run '^$' -bench RoutedUnderFlood -benchtime 5x ./edge/server/

// storeKeys creates n http tunnel keys through the API, each limited to its
// own host, as an edge serving n tunnels holds them.
func storeKeys(b *testing.B, e *testEdge, n int) {
	b.Helper()
	api := e.client(e.writeKey)
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			_, err := api.CreateTunnelKey(context.Background(), apiwire.CreateTunnelKey{
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
		// Set up outside b.Run, whose function runs once per b.N tried.
		e := startEdge(b, b.TempDir())
		storeKeys(b, e, keys)
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
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
// tunnel keys in the store, without a flood ("quiet", the baseline) and
// while a second client floods unknown hosts at a fixed rate. 300/s is about
// what saturated a 2,001-key edge on its own when each such request decoded
// every key; 1000/s is more than three times that. The flood is throttled
// because an unthrottled one would measure how two cores are shared between
// two clients, not what an unknown host costs.
//
// Each iteration is one round that measures every configuration for
// roundWindow, one after the other, so that a change in the machine's load
// hits all of them alike; the figures are medians over the rounds, and the
// ratio to quiet is taken within each round. Run several rounds:
//
//	go test -run '^$' -bench RoutedUnderFlood -benchtime 5x ./edge/server/
func BenchmarkRoutedUnderFlood(b *testing.B) {
	e := startEdge(b, b.TempDir())
	storeKeys(b, e, 1999)
	tk := e.tunnelKey(b, apiwire.CreateTunnelKey{Protocol: "http", Address: "routed"})
	s := e.mustDial(b, tk.Key)
	bind(b, s, protocol.BindRequest{Protocol: "http"})
	serveHTTP(b, s, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	routed := "routed." + baseDomain

	floods := []int{0, 300, 1000}
	rates := make([][]float64, len(floods))   // routed req/s per round
	ratios := make([][]float64, len(floods))  // % of the same round's quiet rate
	flooded := make([][]float64, len(floods)) // flood req/s achieved
	b.ResetTimer()
	for range b.N {
		var quiet float64
		for i, f := range floods {
			got, fl := measureRouted(b, e, routed, f)
			if f == 0 {
				quiet = got
			}
			rates[i] = append(rates[i], got)
			ratios[i] = append(ratios[i], 100*got/quiet)
			flooded[i] = append(flooded[i], fl)
		}
	}
	b.StopTimer()
	b.ReportMetric(median(rates[0]), "quiet-req/s")
	for i, f := range floods[1:] {
		b.ReportMetric(median(rates[i+1]), fmt.Sprintf("flood%d-req/s", f))
		b.ReportMetric(median(ratios[i+1]), fmt.Sprintf("flood%d-%%-of-quiet", f))
		b.ReportMetric(median(flooded[i+1]), fmt.Sprintf("flood%d-404/s", f))
	}
	b.ReportMetric(0, "ns/op") // a round's length is fixed: its time says nothing
}

const (
	// roundWindow is how long each configuration is measured in a round.
	roundWindow = 3 * time.Second
	// routedClients send routed requests concurrently, enough to keep the
	// edge busy: with fewer, the figure measures the latency of one
	// request's trip through the tunnel, which any other runnable goroutine
	// stretches, rather than how much routed traffic the edge can carry.
	routedClients = 16
)

// measureRouted sends routed requests from routedClients for roundWindow,
// with a flood of perSecond unknown-host requests alongside when perSecond
// is positive, and returns the routed and the flood rates achieved.
func measureRouted(b *testing.B, e *testEdge, routed string, perSecond int) (routedRate, floodRate float64) {
	pc := newPublicClient(e)
	var n, flooded atomic.Int64
	if perSecond > 0 {
		stop := startFlood(b, e, perSecond, &flooded)
		defer stop()
	}
	start := time.Now()
	end := start.Add(roundWindow)
	var wg sync.WaitGroup
	for range routedClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				if code, err := pc.status(routed); err != nil || code != http.StatusOK {
					b.Errorf("GET %s: %d, %v; want 200", routed, code, err)
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	took := time.Since(start).Seconds()
	return float64(n.Load()) / took, float64(flooded.Load()) / took
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
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
