package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/server"
)

// The whole key list read in pages, as the operator's key view reads it:
// the cost per key should not grow with the number of keys (each page read
// from its place, not every key again). Figures in docs/benchmarks.md:
//
//	go test -run '^$' -bench KeyListInPages -benchtime 5x ./edge/server/
func BenchmarkKeyListInPages(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			e := startEdge(b, b.TempDir(), func(c *server.Config) { c.APIRateLimit, c.APIRateBurst = 1e6, 1e6 })
			api := e.client(e.writeKey)
			ctx := context.Background()
			labels := map[string]string{"cluster": "bench"}
			for from := 0; from < n; from += apiwire.MaxBatch {
				batch := make([]apiwire.CreateTunnelKey, 0, apiwire.MaxBatch)
				for i := from; i < min(from+apiwire.MaxBatch, n); i++ {
					batch = append(batch, apiwire.CreateTunnelKey{Protocol: "http", Address: fmt.Sprintf("k%d", i), Labels: labels})
				}
				if _, err := api.CreateTunnelKeys(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			const page = 100
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				read, req := 0, apiwire.KeyPageRequest{Labels: labels, Limit: page}
				for {
					p, err := api.ListTunnelKeysPage(ctx, req)
					if err != nil {
						b.Fatal(err)
					}
					read += len(p.Items)
					if p.Next == "" {
						break
					}
					req.After = p.Next
				}
				if read != n {
					b.Fatalf("read %d keys, want %d", read, n)
				}
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N*n), "µs/key")
		})
	}
}
