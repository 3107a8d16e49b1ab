package bench

import (
	"context"
	"encoding/json"
	"fmt"

	"net/http"
	"sync/atomic"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/ingress"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/stats"
)

// BenchmarkIngressRouteUpdate measures, over rounds of 50 updates of a
// running Ingress (-benchtime Nx: N rounds), the time from the update call to the new route being served
// through the edge: each update adds a path /u<n> to Service b (until
// then, / sends it to Service a) and drops the previous one. It also
// reports how many times the host's edge session changed (0: no update
// reconnected). Target: p99 < 500 ms.
func BenchmarkIngressRouteUpdate(b *testing.B) {
	const updates = 50
	ctx := context.Background()
	// Go runs a benchmark function more than once (b.N = 1 first): each
	// run gets its own namespace.
	ns := fmt.Sprintf("bench-ingress-%d", ingressRuns.Add(1))
	if _, err := env.cp.Namespace(ctx, ns); err != nil {
		b.Fatal(err)
	}
	ic := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: ingress.ClassName},
		Spec: networkingv1.IngressClassSpec{Controller: ingress.ControllerName}}
	if err := env.cp.Client.Create(ctx, ic); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		svc, err := harness.CreateService(ctx, env.cp.Client, ns, name, harness.ServicePort{Port: 8080})
		if err != nil {
			b.Fatal(err)
		}
		backend, err := harness.ServeEcho(name, svc.Spec.ClusterIP, 8080)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { backend.Close() })
	}
	host := reserveBench(b, ns, "routes")
	path := func(p, svc string) networkingv1.HTTPIngressPath {
		pt := networkingv1.PathTypePrefix
		return networkingv1.HTTPIngressPath{Path: p, PathType: &pt, Backend: networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: 8080}}}}
	}
	setPaths := func(paths ...networkingv1.HTTPIngressPath) func(*networkingv1.Ingress) {
		return func(ing *networkingv1.Ingress) {
			ing.Spec.Rules = []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{
				HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}}
		}
	}
	class := ingress.ClassName
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "routes"},
		Spec: networkingv1.IngressSpec{IngressClassName: &class}}
	setPaths(path("/", "a"))(ing)
	if err := env.cp.Client.Create(ctx, ing); err != nil {
		b.Fatal(err)
	}
	public := client200(env.edge.HTTPAddr())
	if took := waitBackend(b, public, "http://"+host+"/", "a", time.Minute); took < 0 {
		b.Fatal("the Ingress host never served")
	}
	sessions := map[string]bool{}
	session := func() {
		keys, err := env.edge.Client(env.edge.AdminKey).ListTunnelKeys(ctx, map[string]string{edgeapi.LabelHost: host})
		if err != nil || len(keys) != 1 || keys[0].Session == nil {
			b.Fatalf("want one live key for %s, got %v, %v", host, keys, err)
		}
		sessions[keys[0].Session.ID] = true
	}
	session()

	var took []time.Duration // over all b.N rounds of 50 updates
	for i := 0; i < b.N; i++ {
		for j := 0; j < updates; j++ {
			p := fmt.Sprintf("/u%d-%d", i, j)
			start := time.Now()
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				var cur networkingv1.Ingress
				if err := env.cp.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "routes"}, &cur); err != nil {
					return err
				}
				setPaths(path("/", "a"), path(p, "b"))(&cur)
				return env.cp.Client.Update(ctx, &cur)
			})
			if err != nil {
				b.Fatal(err)
			}
			if d := waitBackend(b, public, "http://"+host+p+"/x", "b", 10*time.Second); d < 0 {
				b.Fatalf("update %d: %s never served by b", j, p)
			}
			took = append(took, time.Since(start))
		}
		session()
	}
	// Baseline in the same run: a request through the same host and session
	// with no update in flight.
	var steady []time.Duration
	for range updates {
		start := time.Now()
		resp, err := public.Get("http://" + host + "/")
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		steady = append(steady, time.Since(start))
	}
	b.ReportMetric(stats.Percentile(steady, 50).Seconds()*1000, "steady-get-p50-ms")
	b.ReportMetric(stats.Percentile(took, 50).Seconds()*1000, "p50-ms")
	b.ReportMetric(stats.Percentile(took, 99).Seconds()*1000, "p99-ms")
	b.ReportMetric(stats.Percentile(took, 100).Seconds()*1000, "max-ms")
	b.ReportMetric(float64(len(took)), "updates")
	b.ReportMetric(float64(len(sessions)-1), "reconnects")
}

var ingressRuns atomic.Int32

// reserveBench reserves a subdomain with a Domain and returns its full
// name once Ready.
func reserveBench(b *testing.B, ns, name string) string {
	b.Helper()
	ctx := context.Background()
	d := &tunav1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: tunav1.DomainSpec{Subdomain: ns + "-" + name}}
	if err := env.cp.Client.Create(ctx, d); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if err := env.cp.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
			b.Fatal(err)
		}
		if c := status.Find(d.Status.Conditions, tunav1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue {
			return d.Status.FQDN
		}
		time.Sleep(20 * time.Millisecond) // polling granularity; not measured
	}
	b.Fatalf("Domain %s/%s never Ready", ns, name)
	return ""
}

// waitBackend polls url until the echo backend want answers and returns
// how long that took, or -1 after timeout. It polls back to back: each
// request's own round trip through the edge is the granularity.
func waitBackend(b *testing.B, c *http.Client, url, want string, timeout time.Duration) time.Duration {
	b.Helper()
	start := time.Now()
	for time.Since(start) < timeout {
		resp, err := c.Get(url)
		if err == nil {
			var e harness.Echo
			ok := resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&e) == nil && e.Backend == want
			resp.Body.Close()
			if ok {
				return time.Since(start)
			}
		}
	}
	return -1
}
