package session

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// load sends requests for host on keep-alive connections from clients
// goroutines until stop, counting the ones that did not answer 200.
type load struct {
	ok, failed atomic.Int64
	stop       chan struct{}
	wg         sync.WaitGroup
}

func startLoad(addr, host string, clients int) *load {
	l := &load{stop: make(chan struct{})}
	for range clients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			c := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
				req.Host = host
				resp, err := c.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
				if err != nil || resp.StatusCode != http.StatusOK {
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

func replica(b *testing.B, cfg Config) *Tunnel {
	t := Start(cfg, Traffic{Handler: okHandler}, Backoff{Initial: 50 * time.Millisecond, Max: time.Second}, Hooks{}, logr.Discard(), nil)
	waitConnectedB(b, t)
	return t
}

func waitConnectedB(b *testing.B, t *Tunnel) {
	deadline := time.Now().Add(10 * time.Second)
	for t.State().Phase != PhaseConnected {
		if time.Now().After(deadline) {
			b.Fatalf("replica not connected: %+v", t.State())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BenchmarkRollingRestart counts the requests that fail while an agent's
// replicas are replaced one by one under constant load. pool-drain: two
// replicas, each replaced by starting the new one and draining the old one
// (what a RollingUpdate with maxUnavailable 0 does). single-stop, the
// baseline: one replica, stopped and started again (Recreate).
func BenchmarkRollingRestart(b *testing.B) {
	b.Run("pool-drain", func(b *testing.B) {
		e, cfg := startEdge(b, "rolling")
		host := "rolling.tuna.localhost"
		reps := []*Tunnel{replica(b, cfg), replica(b, cfg)}
		l := startLoad(e.HTTPAddr(), host, 4)
		b.ResetTimer()
		for range b.N {
			for i := range reps {
				next := replica(b, cfg)
				reps[i].Drain(5 * time.Second)
				reps[i] = next
			}
		}
		b.StopTimer()
		l.end()
		b.ReportMetric(float64(l.failed.Load())/float64(b.N), "failed/restart")
		b.ReportMetric(float64(l.ok.Load())/float64(b.N), "ok/restart")
		for _, r := range reps {
			r.Stop()
		}
	})
	b.Run("single-stop", func(b *testing.B) {
		e, cfg := startEdge(b, "recreate")
		host := "recreate.tuna.localhost"
		rep := replica(b, cfg)
		l := startLoad(e.HTTPAddr(), host, 4)
		b.ResetTimer()
		for range b.N {
			rep.Stop()
			rep = replica(b, cfg)
		}
		b.StopTimer()
		l.end()
		b.ReportMetric(float64(l.failed.Load())/float64(b.N), "failed/restart")
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
			reps = append(reps, replica(b, cfg))
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
