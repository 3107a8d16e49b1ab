package session

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/proxy"
)

// load sends GETs and POSTs with 4 KiB bodies, each with an id of its
// own, for host on keep-alive connections from clients goroutines until
// stop, counting the ones that did not get their own answer.
type load struct {
	ok, failed atomic.Int64
	stop       chan struct{}
	wg         sync.WaitGroup
}

func startLoad(addr, host string, clients int) *load {
	l := &load{stop: make(chan struct{})}
	body := strings.Repeat("p", 4<<10)
	for c := range clients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				id := fmt.Sprintf("%d-%d", c, i)
				method, rd, want := http.MethodGet, io.Reader(nil), "GET "+id+" 0"
				if i%2 == 1 {
					method, rd, want = http.MethodPost, strings.NewReader(body), fmt.Sprintf("POST %s %d", id, len(body))
				}
				req, _ := http.NewRequest(method, "http://"+addr+"/", rd)
				req.Host = host
				req.Header.Set("X-Request-Id", id)
				resp, err := hc.Do(req)
				got := ""
				if err == nil {
					b, _ := io.ReadAll(resp.Body)
					_ = resp.Body.Close()
					got = string(b)
				}
				if err != nil || resp.StatusCode != http.StatusOK || got != want {
					l.failed.Add(1)
				} else {
					l.ok.Add(1)
				}
			}
		}()
	}
	return l
}

func (l *load) end() { close(l.stop); l.wg.Wait() }

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })

// onceHandler answers each request with its method, id and body length,
// and counts the ids it sees more than once: requests run twice.
type onceHandler struct {
	mu   sync.Mutex
	seen map[string]bool
	dups int
}

func (h *onceHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	id := r.Header.Get("X-Request-Id")
	h.mu.Lock()
	if h.seen[id] {
		h.dups++
	}
	h.seen[id] = true
	h.mu.Unlock()
	fmt.Fprintf(w, "%s %s %d", r.Method, id, len(b))
}

// upstreamProxy serves h on loopback and returns the agent's proxy to it,
// as an http Tunnel's: plain requests go through the h1 relay.
func upstreamProxy(b testing.TB, h http.Handler) *proxy.HTTP {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return proxy.NewHTTP(proxy.Upstream{Scheme: "http", Addr: ln.Addr().String(), Display: "backend"}, nil)
}

func (h *onceHandler) duplicates() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dups
}

func replica(b testing.TB, cfg Config, h http.Handler) *Tunnel {
	t := Start(cfg, Traffic{Handler: h}, Backoff{Initial: 50 * time.Millisecond, Max: time.Second}, Hooks{}, logr.Discard(), nil)
	waitConnectedB(b, t)
	return t
}

func waitConnectedB(b testing.TB, t *Tunnel) {
	deadline := time.Now().Add(10 * time.Second)
	for t.State().Phase != PhaseConnected {
		if time.Now().After(deadline) {
			b.Fatalf("replica not connected: %+v", t.State())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BenchmarkRollingRestart counts the requests that fail, and those the
// backend runs twice, while an agent's replicas are replaced one by one
// under constant load of GETs and 4 KiB POSTs. pool-drain: two replicas,
// each replaced by starting the new one and draining the old one (what a
// RollingUpdate with maxUnavailable 0 does). single-stop, the baseline:
// one replica, stopped and started again (Recreate).
func BenchmarkRollingRestart(b *testing.B) {
	b.Run("pool-drain", func(b *testing.B) {
		e, cfg := startEdge(b, "rolling")
		host := "rolling.tuna.localhost"
		once := &onceHandler{seen: map[string]bool{}}
		h := upstreamProxy(b, once)
		reps := []*Tunnel{replica(b, cfg, h), replica(b, cfg, h)}
		l := startLoad(e.HTTPAddr(), host, 4)
		b.ResetTimer()
		for range b.N {
			for i := range reps {
				next := replica(b, cfg, h)
				reps[i].Drain(5 * time.Second)
				reps[i] = next
			}
		}
		b.StopTimer()
		l.end()
		b.ReportMetric(float64(l.failed.Load())/float64(b.N), "failed/restart")
		b.ReportMetric(float64(once.duplicates())/float64(b.N), "dup/restart")
		b.ReportMetric(float64(l.ok.Load())/float64(b.N), "ok/restart")
		for _, r := range reps {
			r.Stop()
		}
	})
	b.Run("single-stop", func(b *testing.B) {
		e, cfg := startEdge(b, "recreate")
		host := "recreate.tuna.localhost"
		once := &onceHandler{seen: map[string]bool{}}
		h := upstreamProxy(b, once)
		rep := replica(b, cfg, h)
		l := startLoad(e.HTTPAddr(), host, 4)
		b.ResetTimer()
		for range b.N {
			rep.Stop()
			rep = replica(b, cfg, h)
		}
		b.StopTimer()
		l.end()
		b.ReportMetric(float64(l.failed.Load())/float64(b.N), "failed/restart")
		b.ReportMetric(float64(once.duplicates())/float64(b.N), "dup/restart")
		b.ReportMetric(float64(l.ok.Load())/float64(b.N), "ok/restart")
		rep.Stop()
	})
}

// BenchmarkKilledReplicaRecovery measures, per op, the time from an
// abrupt end of one replica (its session closed without a drain, as a
// killed process's socket is) until a request that misses it succeeds
// again on fresh connections. pool: a second replica serves on; single,
// the baseline: the one replica must come back.
func BenchmarkKilledReplicaRecovery(b *testing.B) {
	served := func(addr, host string) bool {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		req.Host = host
		resp, err := (&http.Transport{DisableKeepAlives: true}).RoundTrip(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	run := func(b *testing.B, label string, replicas int) {
		e, cfg := startEdge(b, label)
		host := label + ".tuna.localhost"
		var reps []*Tunnel
		for range replicas {
			reps = append(reps, replica(b, cfg, okHandler))
		}
		var total time.Duration
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			victim := reps[0]
			b.StartTimer()
			start := time.Now()
			victim.Stop()
			reps = append(reps[1:], Start(cfg, Traffic{Handler: okHandler}, Backoff{Initial: 50 * time.Millisecond, Max: time.Second}, Hooks{}, logr.Discard(), nil))
			for !served(e.HTTPAddr(), host) {
			}
			total += time.Since(start)
			b.StopTimer()
			waitConnectedB(b, reps[len(reps)-1])
			b.StartTimer()
		}
		b.StopTimer()
		b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-to-served/op")
		for _, r := range reps {
			r.Stop()
		}
	}
	b.Run("pool", func(b *testing.B) { run(b, "killpool", 2) })
	b.Run("single", func(b *testing.B) { run(b, "killsingle", 1) })
}
