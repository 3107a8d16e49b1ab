package server_test

import (
	"context"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/tests/stats"
)

// BenchmarkClusterRevocation measures how long a key revoked through node
// A takes to end its sessions on nodes B and C (through the etcd watch),
// against the session on A itself, which the API ends before it answers:
// the baseline of the same run. Figures in docs/benchmarks.md:
//
//	go test -run '^$' -bench ClusterRevocation -benchtime 200x ./edge/server/
func BenchmarkClusterRevocation(b *testing.B) {
	c := startCluster(b, 3, func(cfg *server.Config) { cfg.APIRateLimit, cfg.APIRateBurst = 1e6, 1e6 })
	a := c.nodes[0]
	api := a.client(a.writeKey)
	var local, remote []time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		tk := a.tunnelKey(b, apiwire.CreateTunnelKey{Protocol: "http", Address: "rev." + baseDomain})
		ended := make(chan time.Time, len(c.nodes))
		for _, n := range c.nodes {
			s, err := n.dial(b, tk.Key)
			if err != nil {
				b.Fatal(err)
			}
			bind(b, s, protocol.BindRequest{Protocol: "http", Subdomain: "rev"})
			go func() { <-s.Done(); ended <- time.Now() }()
		}
		b.StartTimer()
		start := time.Now()
		if err := api.RevokeTunnelKey(context.Background(), tk.ID); err != nil {
			b.Fatal(err)
		}
		// The first to end is A's own session; B and C follow.
		for j := range c.nodes {
			select {
			case at := <-ended:
				if j == 0 {
					local = append(local, at.Sub(start))
				} else {
					remote = append(remote, at.Sub(start))
				}
			case <-time.After(10 * time.Second):
				b.Fatal("a session outlived its revocation by 10 s")
			}
		}
	}
	b.ReportMetric(stats.Millis(stats.Percentile(local, 50)), "local-p50-ms")
	b.ReportMetric(stats.Millis(stats.Percentile(remote, 50)), "remote-p50-ms")
	b.ReportMetric(stats.Millis(stats.Percentile(remote, 99)), "remote-p99-ms")
	b.ReportMetric(stats.Millis(stats.Percentile(remote, 100)), "remote-max-ms")
}
