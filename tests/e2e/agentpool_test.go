package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// poolAgent runs an agent replica called name, in a pool of two as the
// chart runs them, with its own mutations on top.
func poolAgent(name string, mutate ...func(*app.AgentOptions)) *harness.Component {
	return harness.StartAgent(env.IDs.Agent, append([]func(*app.AgentOptions){func(o *app.AgentOptions) {
		o.Replica, o.Replicas = name, 2
	}}, mutate...)...)
}

// ownAgents stops the suite's agent for a test that runs its own replicas,
// and starts it again when the test ends (after the test's own replicas
// stopped: cleanups run last first).
func ownAgents(t *testing.T) {
	t.Helper()
	require.NoError(t, env.Agent.Stop())
	t.Cleanup(func() { env.Agent = startAgent() })
}

// waitPool waits until exactly the replicas names hold a live session of
// the Tunnel k, as its status says.
func waitPool(t *testing.T, k types.NamespacedName, names ...string) *tunav1.Tunnel {
	t.Helper()
	var tun tunav1.Tunnel
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.CP.Client.Get(context.Background(), k, &tun))
		var live []string
		for _, e := range tun.Status.Agents {
			if e.Connected {
				live = append(live, e.Name)
			}
		}
		slices.Sort(live) // the server keeps entries in the order they were added
		assert.Equal(c, names, live, "the live replicas in status.agents")
		assert.Equal(c, int32(len(names)), tun.Status.Sessions, "status.sessions")
	}, wait, 50*time.Millisecond)
	return &tun
}

// waitHostSessions waits until the Ingress host's key has n live sessions
// that take new connections (not draining), one per replica that holds it.
func waitHostSessions(t *testing.T, host string, n int) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		keys := hostKeys(c, host)
		require.Len(c, keys, 1, "one key per host")
		serving := 0
		for _, s := range keys[0].Sessions {
			if !s.Draining {
				serving++
			}
		}
		assert.Equal(c, n, serving, "serving sessions of %s: %+v", host, keys[0].Sessions)
	}, wait, 50*time.Millisecond)
}

// loadRun is a running load: counts reads its figures so far, stop ends
// it and returns them.
type loadRun struct {
	counts func() (ok, failed int64, causes []string)
	stop   func() (ok, failed int64, causes []string)
}

// poolLoad asks url from workers goroutines without pause until stopped,
// counting 200s and failures (with the first failures' causes).
func poolLoad(t *testing.T, url string, workers int) loadRun {
	var okN, failN atomic.Int64
	var mu sync.Mutex
	var first []string
	done := make(chan struct{})
	var wg sync.WaitGroup
	pc := publicClient()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				cause := ""
				resp, err := pc.Get(url)
				if err != nil {
					cause = err.Error()
				} else {
					body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						cause = resp.Status + ": " + strings.TrimSpace(string(body))
					}
				}
				if cause == "" {
					okN.Add(1)
					continue
				}
				failN.Add(1)
				mu.Lock()
				if len(first) < 5 {
					first = append(first, cause)
				}
				mu.Unlock()
			}
		}()
	}
	counts := func() (int64, int64, []string) {
		mu.Lock()
		defer mu.Unlock()
		return okN.Load(), failN.Load(), slices.Clone(first)
	}
	var once sync.Once
	stop := func() (int64, int64, []string) {
		once.Do(func() { close(done); wg.Wait() })
		return counts()
	}
	t.Cleanup(func() { stop() })
	return loadRun{counts: counts, stop: stop}
}

// echoLine sends one line on a greeter stream and reads its echo.
func echoLine(conn net.Conn, r *bufio.Reader, i int) error {
	msg := fmt.Sprintf("line %d\n", i)
	if _, err := conn.Write([]byte(msg)); err != nil {
		return err
	}
	got, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if got != "ECHO "+msg {
		return fmt.Errorf("echo %q, want %q", got, "ECHO "+msg)
	}
	return nil
}

// Two agent replicas are replaced one by one, as a rolling update does
// (the new one first, then the old one stops the way SIGTERM stops it: its
// context ends, it leaves the pools and drains): the tunnel and an Ingress
// host each serve every request of a constant load, and a TCP stream open
// on a replica that drains keeps working through the drain and ends
// cleanly within grace.
func TestRollingAgentReplacementFailsNoRequest(t *testing.T) {
	ctx := context.Background()
	ensureTunaClass(t)
	ns := namespace(t)
	ownAgents(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	host := reserve(t, ns, "site")
	require.NoError(t, env.CP.Client.Create(ctx, tunaIngress(ns, "site", rule(host, ingPath{prefix, "/", "web", 8080}))))
	svc, err := harness.CreateService(ctx, env.CP.Client, ns, "postgres", harness.ServicePort{Port: 5432})
	require.NoError(t, err)
	serveGreeter(t, svc.Spec.ClusterIP, 5432, nil)
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "web", ns+"-web", "http://web:8080")))
	applyExample(t, ns, "tunnel-tcp.yaml", nil) // TCPEndpoint postgres + Tunnel postgres
	t.Cleanup(func() {
		deleteAndWait(t, &tunav1.Tunnel{}, key(ns, "postgres"))
		deleteAndWait(t, &tunav1.TCPEndpoint{}, key(ns, "postgres"))
	})

	stopped := map[string]bool{}
	agents := map[string]*harness.Component{}
	// A drain ends as soon as the edge has closed what the session carried,
	// so a long grace costs the test nothing; a short one (the harness's
	// 5 s) could run out on a loaded machine between the drain's start and
	// the stream's last line, and end the stream this test checks.
	const grace = 20 * time.Second // under the wait for a stop (30 s)
	start := func(name string) {
		agents[name] = poolAgent(name, func(o *app.AgentOptions) { o.DrainGrace = grace })
	}
	t.Cleanup(func() {
		for name, a := range agents {
			if !stopped[name] {
				assert.NoError(t, a.Stop(), "stopping %s", name)
			}
		}
	})

	// One replica first, so that the TCP stream is on it.
	start("pool-a")
	web := waitPool(t, key(ns, "web"), "pool-a")
	degraded := meta.FindStatusCondition(web.Status.Conditions, tunav1.ConditionDegraded)
	require.NotNil(t, degraded)
	assert.Equal(t, metav1.ConditionTrue, degraded.Status, "one of two replicas live")
	assert.Equal(t, tunav1.ReasonPoolBelowDesired, degraded.Reason)
	assert.Contains(t, degraded.Message, "1 of 2")
	tcp := waitPool(t, key(ns, "postgres"), "pool-a")
	waitHostSessions(t, host, 1)
	addr := tcp.Status.URL[len("tcp://"):]
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(wait)))
	r := bufio.NewReader(conn)
	_, err = r.ReadString('\n') // the greeting
	require.NoError(t, err)
	require.NoError(t, echoLine(conn, r, 0))

	start("pool-b")
	web = waitPool(t, key(ns, "web"), "pool-a", "pool-b")
	waitPool(t, key(ns, "postgres"), "pool-a", "pool-b")
	waitHostSessions(t, host, 2)
	waitBackend(t, hostURL(host)+"/", "web-8080")
	assert.Equal(t, metav1.ConditionFalse, meta.FindStatusCondition(web.Status.Conditions, tunav1.ConditionDegraded).Status, "two of two live")

	stopLoad := poolLoad(t, web.Status.URL, 4)
	stopHostLoad := poolLoad(t, hostURL(host)+"/", 4)

	// Replace pool-a: pool-c first, then pool-a stops and drains while the
	// stream on it goes on for a second, well within the grace.
	start("pool-c")
	waitPool(t, key(ns, "web"), "pool-a", "pool-b", "pool-c")
	waitHostSessions(t, host, 3)
	stoppedA := make(chan error, 1)
	go func() { stoppedA <- agents["pool-a"].Stop() }()
	stopped["pool-a"] = true
	waitPool(t, key(ns, "web"), "pool-b", "pool-c") // pool-a left: its drain begins
	for i := 1; i <= 20; i++ {
		require.NoError(t, echoLine(conn, r, i), "the stream on the draining replica")
		time.Sleep(50 * time.Millisecond) // a client's pace, not a wait for a condition
	}
	require.NoError(t, conn.Close())
	select {
	case err := <-stoppedA:
		require.NoError(t, err)
	case <-time.After(wait):
		t.Fatal("pool-a did not finish its drain")
	}

	// Replace pool-b the same way.
	start("pool-d")
	waitPool(t, key(ns, "web"), "pool-b", "pool-c", "pool-d")
	waitHostSessions(t, host, 3)
	stopped["pool-b"] = true
	require.NoError(t, agents["pool-b"].Stop())
	web = waitPool(t, key(ns, "web"), "pool-c", "pool-d")
	waitPool(t, key(ns, "postgres"), "pool-c", "pool-d")
	waitHostSessions(t, host, 2)

	ok, failed, causes := stopLoad.stop()
	t.Logf("rolling replacement of two agents under load: %d requests served, %d failed", ok, failed)
	assert.Zero(t, failed, "failed requests during the rolling replacement: %v", causes)
	assert.Positive(t, ok)
	ok, failed, causes = stopHostLoad.stop()
	t.Logf("the Ingress host through the same replacement: %d requests served, %d failed", ok, failed)
	assert.Zero(t, failed, "failed requests on the Ingress host during the rolling replacement: %v", causes)
	assert.Positive(t, ok)
	assert.Equal(t, metav1.ConditionTrue, meta.FindStatusCondition(web.Status.Conditions, tunav1.ConditionReady).Status)
	code, _ := get(t, web.Status.URL)
	assert.Equal(t, http.StatusOK, code, "the new replicas serve")
}

// A hard close of one replica's sessions: the agent closes them at once,
// without draining (--drain-grace negative), and the edge sees what a
// SIGKILL shows it: the connection ends with requests in flight. Only
// those may fail; the other replica serves the rest. The SIGKILL itself,
// of the shipped binary, is TestSIGKILLedAgentFailsOnlyRequestsInFlight.
func TestHardClosedAgentFailsOnlyRequestsInFlight(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ownAgents(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "web", ns+"-web", "http://web:8080")))

	a := poolAgent("pool-a", func(o *app.AgentOptions) { o.DrainGrace = -1 })
	b := poolAgent("pool-b")
	t.Cleanup(func() { assert.NoError(t, b.Stop()) })
	web := waitPool(t, key(ns, "web"), "pool-a", "pool-b")

	const workers = 4
	stopLoad := poolLoad(t, web.Status.URL, workers)
	// Some load on both replicas before the close.
	require.Eventually(t, func() bool { ok, _, _ := stopLoad.counts(); return ok > 0 }, wait, 10*time.Millisecond)
	require.NoError(t, a.Stop())
	waitPool(t, key(ns, "web"), "pool-b")
	okAtClose, _, _ := stopLoad.counts()
	require.Eventually(t, func() bool { ok, _, _ := stopLoad.counts(); return ok > okAtClose+100 }, wait, 10*time.Millisecond,
		"the other replica serves on after the hard close")

	ok, failed, causes := stopLoad.stop()
	t.Logf("hard close of one of two agents under load (%d workers): %d requests served, %d failed: %v", workers, ok, failed, causes)
	// Each worker has at most one request in flight when the sessions close.
	assert.LessOrEqual(t, failed, int64(workers), "only requests in flight on the closed sessions may fail: %v", causes)
	degraded := meta.FindStatusCondition(waitPool(t, key(ns, "web"), "pool-b").Status.Conditions, tunav1.ConditionDegraded)
	require.NotNil(t, degraded)
	assert.Equal(t, tunav1.ReasonPoolBelowDesired, degraded.Reason)
}
