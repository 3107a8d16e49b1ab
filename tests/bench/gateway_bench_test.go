package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gatewayclass"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/stats"
)

// BenchmarkHTTPRouteUpdate is BenchmarkIngressRouteUpdate for the Gateway
// API: over rounds of 50 updates of a running HTTPRoute (-benchtime Nx: N
// rounds), the time from the update call to the new rule being served
// through the edge. Each update adds a rule PathPrefix /u<n> to Service b
// (until then, / sends it to Service a) and drops the previous one. It
// also reports how many times the host's edge session changed (0: no
// update reconnected).
func BenchmarkHTTPRouteUpdate(b *testing.B) {
	const updates = 50
	ctx := context.Background()
	ns := fmt.Sprintf("bench-httproute-%d", gatewayRuns.Add(1))
	if _, err := env.cp.Namespace(ctx, ns); err != nil {
		b.Fatal(err)
	}
	gc := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: gatewayclass.ClassName}, Spec: gwv1.GatewayClassSpec{ControllerName: gatewayclass.ControllerName}}
	if err := env.cp.Client.Create(ctx, gc); err != nil && !apierrors.IsAlreadyExists(err) {
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
	hostname := gwv1.Hostname(host)
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"}, Spec: gwv1.GatewaySpec{GatewayClassName: gatewayclass.ClassName,
		Listeners: []gwv1.Listener{{Name: "web", Protocol: gwv1.HTTPProtocolType, Port: 80, Hostname: &hostname}}}}
	if err := env.cp.Client.Create(ctx, gw); err != nil {
		b.Fatal(err)
	}
	rule := func(p, svc string) gwv1.HTTPRouteRule {
		typ, port := gwv1.PathMatchPathPrefix, gwv1.PortNumber(8080)
		return gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: &typ, Value: &p}}},
			BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(svc), Port: &port}}}}}
	}
	rt := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "routes"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
		Rules:           []gwv1.HTTPRouteRule{rule("/", "a")}}}
	if err := env.cp.Client.Create(ctx, rt); err != nil {
		b.Fatal(err)
	}
	public := client200(env.edge.HTTPAddr())
	if took := waitBackend(b, public, "http://"+host+"/", "a", time.Minute); took < 0 {
		b.Fatal("the Gateway host never served")
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

	var took []time.Duration
	for i := 0; i < b.N; i++ {
		for j := 0; j < updates; j++ {
			p := fmt.Sprintf("/u%d-%d", i, j)
			start := time.Now()
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				var cur gwv1.HTTPRoute
				if err := env.cp.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "routes"}, &cur); err != nil {
					return err
				}
				cur.Spec.Rules = []gwv1.HTTPRouteRule{rule("/", "a"), rule(p, "b")}
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

var gatewayRuns atomic.Int32
