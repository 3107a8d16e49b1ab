package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// onceBackend counts each request by its X-Request-Id: a request the
// product sent twice shows up as a duplicate.
type onceBackend struct {
	mu   sync.Mutex
	seen map[string]int
	dups []string
}

func (b *onceBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id := r.Header.Get("X-Request-Id")
	b.mu.Lock()
	b.seen[id]++
	if b.seen[id] == 2 {
		b.dups = append(b.dups, r.Method+" "+id)
	}
	b.mu.Unlock()
	fmt.Fprintf(w, "%s %s %d", r.Method, id, len(body))
}

func (b *onceBackend) duplicates() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.dups...)
}

// onceLoad sends GETs and POSTs with 4 KiB bodies, each with an id of its
// own, from workers clients on keep-alive connections, and counts the
// answers that are not the backend's own answer to that very request.
type onceLoad struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	causes     []string
	stop       chan struct{}
	wg         sync.WaitGroup
}

func startOnceLoad(url string, workers int) *onceLoad {
	l := &onceLoad{stop: make(chan struct{})}
	body := bytes.Repeat([]byte("p"), 4<<10)
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			pc := publicClient()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%d", w, i)
				method, want := http.MethodGet, fmt.Sprintf("GET %s 0", id)
				var rd io.Reader
				if i%2 == 1 {
					method, want, rd = http.MethodPost, fmt.Sprintf("POST %s %d", id, len(body)), bytes.NewReader(body)
				}
				req, _ := http.NewRequest(method, url, rd)
				req.Header.Set("X-Request-Id", id)
				cause := ""
				resp, err := pc.Do(req)
				if err != nil {
					cause = err.Error()
				} else {
					got, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
					_ = resp.Body.Close()
					if resp.StatusCode != http.StatusOK || string(got) != want {
						cause = fmt.Sprintf("%s %s: %s %q", method, id, resp.Status, strings.TrimSpace(string(got)))
					}
				}
				if cause == "" {
					l.ok.Add(1)
					continue
				}
				l.failed.Add(1)
				l.mu.Lock()
				if len(l.causes) < 5 {
					l.causes = append(l.causes, cause)
				}
				l.mu.Unlock()
			}
		}()
	}
	return l
}

func (l *onceLoad) end() (ok, failed int64, causes []string) {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ok.Load(), l.failed.Load(), l.causes
}

// The shipped agent binary, two replicas as processes with the chart's
// arguments, replaced one by one in the chart's order under a load of
// GETs and POSTs with bodies: the new replica starts and joins the pool
// (maxSurge 1), the old one keeps serving through its preStop wait, then
// gets SIGTERM and drains. No request fails and the backend runs none
// twice. Before the edge took the drained session's channels back itself,
// a rolling restart lost 2 or 3 POSTs and ran 14 or 15 GETs twice.
func TestRollingRestartRunsEveryRequestOnce(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ownAgents(t)
	svc, err := harness.CreateService(ctx, env.CP.Client, ns, "web", harness.ServicePort{Port: 8080})
	require.NoError(t, err)
	backend := &onceBackend{seen: map[string]int{}}
	b, err := harness.Serve(svc.Spec.ClusterIP, 8080, backend)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "web", ns+"-web", "http://web:8080")))

	dir := t.TempDir()
	bin, err := harness.BuildOperator(dir)
	require.NoError(t, err)
	kubeconfig := dir + "/kubeconfig"
	require.NoError(t, env.CP.WriteKubeconfigAs(kubeconfig, env.IDs.Agent.Impersonate))
	// The chart's agent arguments (templates/agent/deployment.yaml), with
	// a drain grace that fits a test. The heartbeat TTL is half the
	// chart's, not shorter: every replica here leaves gracefully (its
	// entries go at once), so the TTL only decides when a replica whose
	// Lease renewals are starved of CPU is taken for dead and pruned from
	// status.agents. At 5 s, a CI machine loaded to 15x its cores pruned
	// live replicas and the pool never looked whole within the wait.
	agents := map[string]*harness.Process{}
	start := func(name string) {
		t.Helper()
		pdir := dir + "/" + name
		require.NoError(t, os.MkdirAll(pdir, 0o700))
		p, err := harness.StartAgentProcess(bin, kubeconfig, pdir, "--replica="+name, "--replicas=2",
			"--keepalive-interval=15s", "--keepalive-timeout=45s", "--drain-grace=10s", "--heartbeat-ttl=15s",
			"--metrics-bind-address="+ports.Addr(t))
		require.NoError(t, err)
		agents[name] = p
	}
	t.Cleanup(func() {
		for name, p := range agents {
			if !p.Exited() {
				assert.NoError(t, p.Stop(), "stopping %s", name)
			}
			if t.Failed() {
				if log, err := os.ReadFile(p.Log); err == nil {
					t.Logf("%s's log:\n%s", name, log)
				}
			}
		}
	})
	start("roll-a")
	start("roll-b")
	web := waitPool(t, key(ns, "web"), "roll-a", "roll-b")

	const workers = 4
	load := startOnceLoad(web.Status.URL, workers)
	live := []string{"roll-a", "roll-b"}
	restarts := 0
	began := time.Now()
	for round := range 2 {
		for i, old := range live {
			next := fmt.Sprintf("roll-%d%d", round, i)
			start(next) // the surge pod
			pool := append([]string{}, live...)
			pool = append(pool, next)
			waitPool(t, key(ns, "web"), slices.Sorted(slices.Values(pool))...)
			// preStop: the old pod is already leaving the endpoints but
			// still serves for preStopSeconds before its SIGTERM.
			time.Sleep(time.Second)
			require.NoError(t, agents[old].Stop(), "SIGTERM and drain of %s", old)
			live[i] = next
			restarts++
			waitPool(t, key(ns, "web"), slices.Sorted(slices.Values(live))...)
		}
	}
	ok, failed, causes := load.end()
	dups := backend.duplicates()
	t.Logf("rolling restart of 2 shipped agents, %d times in %s, under %d workers of GETs and 4 KiB POSTs: %d requests served, %d failed, %d run twice",
		restarts, time.Since(began).Round(time.Second), workers, ok, failed, len(dups))
	assert.Zero(t, failed, "failed requests: %v", causes)
	assert.Empty(t, dups, "requests the backend ran twice")
	assert.Greater(t, ok, int64(100), "requests served")
}
