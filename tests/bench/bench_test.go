package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/stats"
)

func tunnel(ns, name string) *tunav1.Tunnel {
	return &tunav1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: tunav1.TunnelSpec{Protocol: tunav1.ProtocolHTTP, Subdomain: ns + "-" + name,
			Upstream: tunav1.TunnelUpstream{URL: "http://web:8080"}}}
}

func setupNamespace(b *testing.B, ns string) string {
	b.Helper()
	ctx := context.Background()
	if _, err := env.cp.Namespace(ctx, ns); err != nil {
		b.Fatal(err)
	}
	svc, err := harness.CreateService(ctx, env.cp.Client, ns, "web", harness.ServicePort{Port: 8080})
	if err != nil {
		b.Fatal(err)
	}
	backend, err := harness.ServeEcho("web", svc.Spec.ClusterIP, 8080)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { backend.Close() })
	return svc.Spec.ClusterIP
}

func client200(addr string) *http.Client {
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}}
}

// BenchmarkCreateToFirst200 creates 20 Tunnels one after another and
// measures, for each, the time from the create call to the first 200
// through the edge. The baseline is a GET straight to the backend.
func BenchmarkCreateToFirst200(b *testing.B) {
	ctx := context.Background()
	ip := setupNamespace(b, "bench-latency")
	public := client200(env.edge.HTTPAddr())
	direct := client200(net.JoinHostPort(ip, "8080"))
	for i := 0; i < b.N; i++ {
		var took, baseline []time.Duration
		for j := 0; j < 20; j++ {
			name := fmt.Sprintf("t%d-%d", i, j)
			host := "http://bench-latency-" + name + "." + harness.BaseDomain + "/"
			start := time.Now()
			if err := env.cp.Client.Create(ctx, tunnel("bench-latency", name)); err != nil {
				b.Fatal(err)
			}
			for {
				resp, err := public.Get(host)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						break
					}
				}
				if time.Since(start) > time.Minute {
					b.Fatalf("tunnel %s never answered 200", name)
				}
				time.Sleep(5 * time.Millisecond) // polling granularity of the measurement
			}
			took = append(took, time.Since(start))
			s := time.Now()
			resp, err := direct.Get("http://web/")
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			baseline = append(baseline, time.Since(s))
		}
		b.ReportMetric(stats.Percentile(took, 50).Seconds()*1000, "p50-ms")
		b.ReportMetric(stats.Percentile(took, 99).Seconds()*1000, "p99-ms")
		b.ReportMetric(stats.Percentile(baseline, 50).Seconds()*1000, "direct-p50-ms")
		_ = env.cp.Client.DeleteAllOf(ctx, &tunav1.Tunnel{}, client.InNamespace("bench-latency"))
	}
}

// BenchmarkIdleTunnels1000 creates 1,000 Tunnels at once and measures the
// time until all are Ready and the agent process's memory (VmRSS) with them
// idle. The baseline is the agent's RSS before any tunnel exists.
func BenchmarkIdleTunnels1000(b *testing.B) {
	const n = 1000
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		ns := fmt.Sprintf("bench-idle-%d", i)
		setupNamespace(b, ns)
		before := rssMB(b)
		start := time.Now()
		for j := 0; j < n; j++ {
			if err := env.cp.Client.Create(ctx, tunnel(ns, fmt.Sprintf("t%d", j))); err != nil {
				b.Fatal(err)
			}
		}
		for {
			var list tunav1.TunnelList
			if err := env.cp.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
				b.Fatal(err)
			}
			ready := 0
			for _, t := range list.Items {
				if c := status.Find(t.Status.Conditions, tunav1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue {
					ready++
				}
			}
			if ready == n {
				break
			}
			if time.Since(start) > 10*time.Minute {
				b.Fatalf("only %d of %d tunnels Ready after 10 minutes", ready, n)
			}
			time.Sleep(250 * time.Millisecond)
		}
		allReady := time.Since(start)
		time.Sleep(5 * time.Second) // let the agent settle to idle before reading RSS
		b.ReportMetric(allReady.Seconds(), "s-to-all-ready")
		b.ReportMetric(rssMB(b), "agent-rss-MB")
		b.ReportMetric(before, "agent-rss-baseline-MB")
	}
}

func rssMB(b *testing.B) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", env.agentPID))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, _ := strconv.Atoi(strings.Fields(line)[1])
			return float64(kb) / 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
