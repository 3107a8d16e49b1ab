package cluster

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/session"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
	"code.tuna.am/tuna/k8s-operator/tests/stats"
)

// benchTunnel starts an edge cluster of nodes processes and the agent's
// tunnel (operator/pkg/agent/session, as the agent runs it) of app.<base>,
// given node 0's SSH address only, answering "ok" itself; it returns once
// the tunnel holds a session to every node.
func benchTunnel(b *testing.B, nodes int) (*harness.EdgeCluster, *session.Tunnel) {
	b.Helper()
	c, err := harness.StartEdgeCluster(b.TempDir(), nodes, harness.EdgeClusterOptions{
		KeepaliveInterval: 500 * time.Millisecond, KeepaliveTimeout: 2 * time.Second,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	api := c.Client(0, c.OperatorKey)
	tk, err := api.CreateTunnelKey(context.Background(), apiwire.CreateTunnelKey{Protocol: "http", Address: "app"})
	if err != nil {
		b.Fatal(err)
	}
	info, err := api.Edge(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	tun := session.Start(session.Config{
		Edge: tunnelclient.Config{Addr: info.SSHAddr, Key: tk.Key, HostKey: info.SSHHostKey,
			KeepaliveInterval: 500 * time.Millisecond, KeepaliveTimeout: 2 * time.Second},
		Bind: protocol.BindRequest{Protocol: "http", Subdomain: "app"},
	}, session.Traffic{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })},
		session.Backoff{Initial: 100 * time.Millisecond, Max: 2 * time.Second}, session.Hooks{}, logr.Discard(), nil)
	b.Cleanup(tun.Stop)
	deadline := time.Now().Add(30 * time.Second)
	for tun.State().Sessions < nodes {
		if time.Now().After(deadline) {
			b.Fatalf("the tunnel holds %d of %d sessions", tun.State().Sessions, nodes)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return c, tun
}

// served reports whether a GET of app.<base> through addr answers 200.
func served(hc *http.Client, addr string) bool {
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	req.Host = host
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// BenchmarkClusterNodeJoin measures how long a node that joins the cluster
// takes to serve a tunnel it has never seen, with no operator action: from
// the start of its process to the first 200 through its public listener.
// The baseline of the same run is the node's own start: process start to
// its API answering. Each iteration drains the node again (SIGTERM), so
// the next start is a new run of it the agent must dial afresh. Figures in
// docs/benchmarks.md:
//
//	go test -run '^$' -bench ClusterNodeJoin -benchtime 20x ./tests/e2e/cluster/
func BenchmarkClusterNodeJoin(b *testing.B) {
	c, tun := benchTunnel(b, 3)
	i, err := c.NewNode()
	if err != nil {
		b.Fatal(err)
	}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var join, api []time.Duration
	for b.Loop() {
		start := time.Now()
		up := make(chan time.Duration, 1)
		go func() {
			if err := c.Start(i); err != nil {
				b.Error(err)
			}
			up <- time.Since(start)
		}()
		for !served(hc, c.Nodes[i].HTTPAddr) {
			time.Sleep(5 * time.Millisecond)
		}
		join = append(join, time.Since(start))
		api = append(api, <-up)
		b.StopTimer()
		c.Stop(i)
		for tun.State().Sessions != 3 {
			time.Sleep(5 * time.Millisecond)
		}
		b.StartTimer()
	}
	b.ReportMetric(stats.Millis(stats.Percentile(join, 50)), "join-served-p50-ms")
	b.ReportMetric(stats.Millis(stats.Percentile(join, 100)), "join-served-max-ms")
	b.ReportMetric(stats.Millis(stats.Percentile(api, 50)), "baseline-start-api-p50-ms")
}

// BenchmarkClusterThroughput measures requests/s through the tunnel with
// every request to one node, and spread over three, from 16 concurrent
// keep-alive clients; direct is the same clients asking a plain HTTP
// server on loopback, the baseline of the same run. Figures in
// docs/benchmarks.md:
//
//	go test -run '^$' -bench ClusterThroughput -benchtime 10s ./tests/e2e/cluster/
func BenchmarkClusterThroughput(b *testing.B) {
	c, _ := benchTunnel(b, 3)
	ln, err := net.Listen("tcp", ports.Addr(b))
	if err != nil {
		b.Fatal(err)
	}
	direct := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = direct.Serve(ln) }()
	b.Cleanup(func() { _ = direct.Close() })
	run := func(b *testing.B, addrs []string) {
		var next, failed atomic.Int64
		b.SetParallelism(8) // 16 clients on 2 cores
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			for pb.Next() {
				if !served(hc, addrs[int(next.Add(1))%len(addrs)]) {
					failed.Add(1)
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
		if failed.Load() > 0 {
			b.Fatalf("%d requests failed", failed.Load())
		}
	}
	var all []string
	for _, n := range c.Nodes {
		all = append(all, n.HTTPAddr)
	}
	b.Run("direct", func(b *testing.B) { run(b, []string{ln.Addr().String()}) })
	b.Run("nodes=1", func(b *testing.B) { run(b, all[:1]) })
	b.Run("nodes=3", func(b *testing.B) { run(b, all) })
}
