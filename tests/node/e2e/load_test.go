//go:build node

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// load sends requests of every method through the edge until stopped:
// some answered at once, some after a pause (in flight when a pod
// drains), each with its own X-Request-Id so that the backend counts a
// request served twice. No request is replayable (a body without
// GetBody), so the client never retries one on its own: what fails is
// counted.
type load struct {
	url    string
	client *http.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup
	seq    atomic.Int64

	mu        sync.Mutex
	sent, ok  int
	failures  []string
	seenTwice []string
	latencies []time.Duration
	byMethod  map[string]int
}

var methods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

func startLoad(url string, workers int) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{url: url, client: publicClient(), cancel: cancel, byMethod: map[string]int{}}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				l.once(ctx, methods[(w+i)%len(methods)], i%4 == 0)
			}
		}()
	}
	return l
}

func (l *load) once(ctx context.Context, method string, slow bool) {
	id := fmt.Sprintf("req-%d", l.seq.Add(1))
	url := l.url
	if slow {
		url += "?sleep=300ms"
	}
	var body []byte
	if method != http.MethodGet && method != http.MethodDelete {
		body = bytes.Repeat([]byte("x"), 1024)
	}
	req, err := http.NewRequest(method, url, io.NopCloser(bytes.NewReader(body)))
	if err != nil {
		panic(err)
	}
	req.ContentLength = int64(len(body))
	req.GetBody = nil // not replayable: no silent retry
	req.Header.Set("X-Request-Id", id)
	start := time.Now()
	resp, err := l.client.Do(req)
	took := time.Since(start)
	if ctx.Err() != nil {
		return // stopped while in flight: not counted
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent++
	l.byMethod[method]++
	if err != nil {
		l.failures = append(l.failures, fmt.Sprintf("%s %s %s: %v", time.Now().Format("15:04:05.000"), method, id, err))
		return
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		l.failures = append(l.failures, fmt.Sprintf("%s %s %s: %d %q", time.Now().Format("15:04:05.000"), method, id, resp.StatusCode, strings.TrimSpace(string(b))))
		return
	}
	if seen := resp.Header.Get("X-Seen"); seen != "1" {
		l.seenTwice = append(l.seenTwice, id+" seen "+seen)
	}
	l.ok++
	l.latencies = append(l.latencies, took)
}

// succeeded is how many requests were answered 200 so far.
func (l *load) succeeded() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ok
}

// loadResult is what a load saw.
type loadResult struct {
	Sent, OK      int
	Failures      []string
	SeenTwice     []string
	P50, P99, Max time.Duration
	ByMethod      map[string]int
}

func (l *load) stop() loadResult {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := loadResult{Sent: l.sent, OK: l.ok, Failures: l.failures, SeenTwice: l.seenTwice, ByMethod: l.byMethod}
	sort.Slice(l.latencies, func(a, b int) bool { return l.latencies[a] < l.latencies[b] })
	if n := len(l.latencies); n > 0 {
		r.P50, r.P99, r.Max = l.latencies[n/2], l.latencies[n*99/100], l.latencies[n-1]
	}
	return r
}

func (r loadResult) String() string {
	return fmt.Sprintf("%d requests (%v), %d failed, %d served twice; latency p50 %v, p99 %v, max %v",
		r.Sent, r.ByMethod, len(r.Failures), len(r.SeenTwice), r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond), r.Max.Round(time.Millisecond))
}
