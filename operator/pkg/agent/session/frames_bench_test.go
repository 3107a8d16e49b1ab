package session

import (
	"context"
	"io"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/proxy"
)

// BenchmarkH2Paths measures small HTTP/2 requests through the real edge
// and agent in process, over both paths and with each of the edge's
// HTTP/2 servers, 64 in flight on one client connection: run them
// alternately (-count) for a ratio on a shared machine, and profile one
// with -cpuprofile.
//
//	go test -run '^$' -bench BenchmarkH2Paths -count 4 ./operator/pkg/agent/session/
//	go test -run '^$' -bench 'BenchmarkH2Paths/edge-h2/frames' -cpuprofile /tmp/h2.pprof ./operator/pkg/agent/session/
func BenchmarkH2Paths(b *testing.B) {
	backend := serveBackend(b, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	}))
	for _, srv := range edgeH2Servers {
		h := startH2Edge(b, func(c *server.Config) { c.NetHTTPH2 = srv.netHTTP })
		for _, p := range h2Paths {
			host, _ := h.publish(b, "bench-"+p.name, proxy.Upstream{Scheme: "http", Addr: backend, Display: "backend"}, p.frames)
			c := h.client(b)
			b.Run(srv.name+"/"+p.name, func(b *testing.B) {
				var wg sync.WaitGroup
				work := make(chan struct{}, b.N)
				for range b.N {
					work <- struct{}{}
				}
				close(work)
				b.ResetTimer()
				cpu := processCPU(b)
				for range 64 {
					wg.Go(func() {
						for range work {
							req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://"+host+"/", nil)
							res, err := c.Do(req)
							if err != nil {
								b.Error(err)
								return
							}
							_, _ = io.Copy(io.Discard, res.Body)
							_ = res.Body.Close()
						}
					})
				}
				wg.Wait()
				b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// processCPU is the CPU time (user and system) of the whole test process
// so far: clients, edge, agent and backend. On a machine others load too,
// ns/op follows the share of the CPU the process gets; cpu-ns/op, what a
// request costs, much less.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
