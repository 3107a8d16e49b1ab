// Package cluster runs tuna-edge as a cluster of real processes on a real
// three-member etcd, and takes parts of it away: a node killed under load
// and restarted, etcd members stopped. In TestEdgeClusterOfProcesses the
// tunnel's sessions are held by tunnelclient sessions, one per node; in
// TestAgentsServeThroughEveryNode by the operator's agents, which follow
// the node list the edge sends them.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

const host = "app." + harness.BaseDomain

// agent holds one session per node for one tunnel key and serves HTTP on
// each, answering with the node's name.
type agent struct {
	t   *testing.T
	c   *harness.EdgeCluster
	key string
	mu  sync.Mutex
	ss  map[int]*tunnelclient.Session
}

func (a *agent) attach(i int) *tunnelclient.Session {
	a.t.Helper()
	info, err := a.c.Client(i, a.c.OperatorKey).Edge(context.Background())
	if err != nil {
		a.t.Fatal(err)
	}
	s, err := tunnelclient.Dial(context.Background(), tunnelclient.Config{
		Addr: info.SSHAddr, Key: a.key, HostKey: info.SSHHostKey,
		KeepaliveInterval: 500 * time.Millisecond, KeepaliveTimeout: 2 * time.Second,
	})
	if err != nil {
		a.t.Fatalf("session to %s: %v", a.c.Nodes[i].Name, err)
	}
	if _, err := s.Bind(context.Background(), protocol.BindRequest{Protocol: "http", Subdomain: "app"}); err != nil {
		a.t.Fatal(err)
	}
	name := a.c.Nodes[i].Name
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, name) })}
	go func() { _ = srv.Serve(s.Listener()) }()
	a.t.Cleanup(func() { _ = srv.Close(); _ = s.Close() })
	a.mu.Lock()
	a.ss[i] = s
	a.mu.Unlock()
	return s
}

// load sends GETs for host through every node until stop, counting
// answers by node; answered says whether a 200's body through node n is
// the right one (a wrong one is counted apart).
type load struct {
	ok, failed []atomic.Int64
	wrong      atomic.Int64
	lastErr    atomic.Value // string: the last failure, for messages
	stop       chan struct{}
	once       sync.Once
	wg         sync.WaitGroup
}

func startLoad(c *harness.EdgeCluster, answered func(n *harness.EdgeNode, body string) bool) *load {
	l := &load{ok: make([]atomic.Int64, len(c.Nodes)), failed: make([]atomic.Int64, len(c.Nodes)), stop: make(chan struct{})}
	for i, n := range c.Nodes {
		l.wg.Go(func() {
			hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodGet, "http://"+n.HTTPAddr+"/", nil)
				req.Host = host
				resp, err := hc.Do(req)
				if err != nil {
					l.lastErr.Store(fmt.Sprintf("node %d: %v", i, err))
					l.failed[i].Add(1)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				switch {
				case resp.StatusCode != http.StatusOK:
					l.lastErr.Store(fmt.Sprintf("node %d: %d %s", i, resp.StatusCode, b))
					l.failed[i].Add(1)
					time.Sleep(10 * time.Millisecond)
				case !answered(n, string(b)):
					l.lastErr.Store(fmt.Sprintf("node %d: wrong answer %s", i, b))
					l.wrong.Add(1)
				default:
					l.ok[i].Add(1)
				}
			}
		})
	}
	return l
}

func (l *load) snapshot() (ok, failed []int64) {
	for i := range l.ok {
		ok = append(ok, l.ok[i].Load())
		failed = append(failed, l.failed[i].Load())
	}
	return ok, failed
}

// String says what the load saw so far, for a failure's message.
func (l *load) String() string {
	ok, failed := l.snapshot()
	return fmt.Sprintf("ok %v, failed %v, wrong %d, last failure %v", ok, failed, l.wrong.Load(), l.lastErr.Load())
}

func (l *load) end() { l.once.Do(func() { close(l.stop) }); l.wg.Wait() }

// await polls cond until it holds or a deadline passes; detail, if given,
// says what was seen last.
func await(t *testing.T, what string, d time.Duration, cond func() bool, detail ...func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			var seen string
			for _, f := range detail {
				seen += "; last seen: " + f()
			}
			t.Fatalf("timed out after %s waiting for %s%s", d, what, seen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func nodeNames(t *testing.T, c *harness.EdgeCluster, via int) string {
	t.Helper()
	ns, err := c.Client(via, c.OperatorKey).Nodes(context.Background())
	if err != nil {
		return "error: " + err.Error()
	}
	var names []string
	for _, n := range ns {
		names = append(names, n.Name)
	}
	return strings.Join(names, ",")
}

func TestEdgeClusterOfProcesses(t *testing.T) {
	c, err := harness.StartEdgeCluster(t.TempDir(), 3, harness.EdgeClusterOptions{
		KeepaliveInterval: 500 * time.Millisecond, KeepaliveTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if got := nodeNames(t, c, 0); got != "edge-0,edge-1,edge-2" {
		t.Fatalf("nodes: %s", got)
	}
	tk, err := c.Client(0, c.OperatorKey).CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "http", Address: "app"})
	if err != nil {
		t.Fatal(err)
	}
	a := &agent{t: t, c: c, key: tk.Key, ss: map[int]*tunnelclient.Session{}}
	for i := range c.Nodes {
		a.attach(i)
	}
	// A request through node i must be answered by node i's session.
	l := startLoad(c, func(n *harness.EdgeNode, body string) bool { return body == n.Name })
	defer l.end()
	await(t, "requests through every node", 30*time.Second, func() bool {
		ok, _ := l.snapshot()
		return !slices.Contains(ok, 0)
	})

	t.Run("a killed node costs only its own connections", func(t *testing.T) {
		okBefore, failedBefore := l.snapshot()
		c.Kill(1)
		await(t, "the others serving on after the kill", 10*time.Second, func() bool {
			ok, _ := l.snapshot()
			return ok[0] > okBefore[0]+50 && ok[2] > okBefore[2]+50
		})
		_, failed := l.snapshot()
		if failed[0] != failedBefore[0] || failed[2] != failedBefore[2] {
			t.Fatalf("requests through the live nodes failed: before %v, after %v", failedBefore, failed)
		}
		if failed[1] == failedBefore[1] {
			t.Fatal("no request through the killed node failed: was it killed?")
		}
		await(t, "the dead node off the list (lease)", 15*time.Second, func() bool { return nodeNames(t, c, 0) == "edge-0,edge-2" })
	})

	t.Run("a restarted node serves again", func(t *testing.T) {
		if err := c.Start(1); err != nil {
			t.Fatal(err)
		}
		await(t, "the node listed again", 10*time.Second, func() bool { return nodeNames(t, c, 2) == "edge-0,edge-1,edge-2" })
		a.attach(1) // as an agent does when the node reappears
		ok, _ := l.snapshot()
		await(t, "requests through the restarted node", 10*time.Second, func() bool {
			now, _ := l.snapshot()
			return now[1] > ok[1]+20
		})
	})

	t.Run("one etcd member down changes nothing", func(t *testing.T) {
		c.Etcd.Stop(2)
		if _, err := c.Client(1, c.OperatorKey).CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "one-down"}); err != nil {
			t.Fatalf("write with one member down: %v", err)
		}
		ok, failedBefore := l.snapshot()
		await(t, "requests through every node with one member down", 10*time.Second, func() bool {
			now, _ := l.snapshot()
			return now[0] > ok[0]+20 && now[1] > ok[1]+20 && now[2] > ok[2]+20
		})
		if _, failed := l.snapshot(); !slices.Equal(failed, failedBefore) {
			t.Fatalf("requests failed with one member down: %v → %v", failedBefore, failed)
		}
	})

	t.Run("without quorum writes are refused and tunnels serve", func(t *testing.T) {
		c.Etcd.Stop(1)
		_, err := c.Client(0, c.OperatorKey).CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "two-down"})
		var ae *apiwire.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || ae.Code != apiwire.CodeStateUnavailable {
			t.Fatalf("write without quorum: %v, want 503 state_unavailable", err)
		}
		ok, failedBefore := l.snapshot()
		await(t, "requests through every node without quorum", 10*time.Second, func() bool {
			now, _ := l.snapshot()
			return now[0] > ok[0]+20 && now[1] > ok[1]+20 && now[2] > ok[2]+20
		})
		if _, failed := l.snapshot(); !slices.Equal(failed, failedBefore) {
			t.Fatalf("requests failed without quorum: %v → %v", failedBefore, failed)
		}
		for _, i := range []int{1, 2} {
			if err := c.Etcd.Restart(i); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Etcd.WaitHealthy(time.Minute); err != nil {
			t.Fatal(err)
		}
		await(t, "writes again", 30*time.Second, func() bool {
			_, err := c.Client(0, c.OperatorKey).CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "two-down"})
			return err == nil
		})
	})

	t.Run("a key revoked through one node ends its sessions on the others within 1s", func(t *testing.T) {
		start := time.Now()
		if err := c.Client(0, c.OperatorKey).RevokeTunnelKey(ctx, tk.ID); err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(c.Nodes); i++ {
			s := a.ss[i]
			select {
			case <-s.Done():
			case <-time.After(time.Second):
				t.Fatalf("the session on %s outlived the revocation by 1 s", c.Nodes[i].Name)
			}
			var te *tunnelclient.TerminatedError
			if !errors.As(s.Err(), &te) || te.Code != protocol.CodeKeyRevoked {
				t.Fatalf("session on %s ended with %v, want key_revoked", c.Nodes[i].Name, s.Err())
			}
		}
		t.Logf("revocation reached every node's session in %s", time.Since(start))
	})
	if l.wrong.Load() != 0 {
		t.Fatalf("%d requests were answered by another node's session: nodes must route to their own", l.wrong.Load())
	}
}
