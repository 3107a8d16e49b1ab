package hosttunnel

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/proxy"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/session"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/ingress"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/keysecret"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/metrics"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

func ptr[T any](v T) *T { return &v }

func TestSchemeOf(t *testing.T) {
	for in, want := range map[string]string{"": "http", "kubernetes.io/h2c": proxy.SchemeH2C, "HTTPS": "https",
		"kubernetes.io/wss": "https", "kubernetes.io/ws": "http", "http": "http"} {
		p := &corev1.ServicePort{}
		if in != "" {
			p.AppProtocol = ptr(in)
		}
		if got := schemeOf(p); got != want {
			t.Errorf("appProtocol %q: scheme %q, want %q", in, got, want)
		}
	}
	if schemeOf(nil) != "http" {
		t.Error("no port: http")
	}
}

// Each route's backend is resolved through the Service (by port number or
// name, appProtocol chosen), or skipped with a reason; only a changed
// result swaps the host's table.
func TestResolveAndApply(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	svc := func(name, ip string, ports ...corev1.ServicePort) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, Ports: ports}}
	}
	ext := svc("ext", "", corev1.ServicePort{Port: 80})
	ext.Spec.Type, ext.Spec.ExternalName = corev1.ServiceTypeExternalName, "example.com"
	kube := crfake.NewClientBuilder().WithScheme(s).WithObjects(
		svc("web", "10.0.0.4", corev1.ServicePort{Name: "http", Port: 8080}),
		svc("grpc", "10.0.0.5", corev1.ServicePort{Port: 50051, AppProtocol: ptr("kubernetes.io/h2c")}),
		ext,
	).Build()
	backend := func(name string, port networkingv1.ServiceBackendPort) networkingv1.IngressBackend {
		return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name, Port: port}}
	}
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "app", UID: "u1"}}
	route := func(path string, b networkingv1.IngressBackend) ingress.Route {
		return ingress.Route{Ingress: ing, Type: pubhost.Prefix, Path: path, Backend: b}
	}
	merged := ingress.Host{Name: "h.example", Ingresses: []*networkingv1.Ingress{ing}, Routes: []ingress.Route{
		route("/", backend("web", networkingv1.ServiceBackendPort{Name: "http"})),
		route("/grpc", backend("grpc", networkingv1.ServiceBackendPort{Number: 50051})),
		route("/ext", backend("ext", networkingv1.ServiceBackendPort{Number: 80})),
		route("/missing", backend("missing", networkingv1.ServiceBackendPort{Number: 80})),
		route("/port", backend("web", networkingv1.ServiceBackendPort{Number: 9})),
		route("/bucket", networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{Kind: "Bucket", Name: "b"}}),
	}}
	r := &Reconciler{Reader: kube}
	entries, err := r.resolve(context.Background(), merged)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Prefix /|http://10.0.0.4:8080|web:http|",
		"Prefix /grpc|h2c://10.0.0.5:50051|grpc:50051|",
		"ExternalName",
		"Service team/missing does not exist: create it or fix the Ingress backend",
		"has no port 9: use one of its ports 8080 (http)",
		"Bucket/b is not a Service",
	}
	for i, e := range entries {
		if got := e.signature(); !strings.Contains(got, want[i]) {
			t.Errorf("entry %d: %q, want it to contain %q", i, got, want[i])
		}
	}

	h, _ := r.state("h.example", merged.Ingresses)
	before := testutil.ToFloat64(metrics.IngressRouteUpdates.WithLabelValues("h.example"))
	r.applyRoutes("h.example", h, entries, nil)
	r.applyRoutes("h.example", h, entries, nil)
	if got := testutil.ToFloat64(metrics.IngressRouteUpdates.WithLabelValues("h.example")) - before; got != 1 {
		t.Errorf("%v table swaps for one change, want 1", got)
	}
	if h.router.Table().Len() != 6 {
		t.Errorf("table has %d routes, want 6 (skipped ones answer 503)", h.router.Table().Len())
	}
	if m := h.router.Table().Match("/missing/x"); m == nil || m.Name != "Prefix /missing" {
		t.Errorf("a skipped backend's path must not fall through to /: %v", m)
	}
	entries[0].up.Addr = "10.0.0.9:8080" // the Service moved
	r.applyRoutes("h.example", h, entries, nil)
	if got := testutil.ToFloat64(metrics.IngressRouteUpdates.WithLabelValues("h.example")) - before; got != 2 {
		t.Errorf("a re-resolved Service must swap the table")
	}
}

// A host that only Ingresses of namespaces its key Secret does not name
// publish is looked at again, sooner while the wait is young: the Secret
// may be about to name them (a Gateway address moving between
// namespaces), and no event wakes the host when it does. A host nobody
// publishes is not.
func TestHostOfOtherNamespacesIsLookedAtAgain(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	const host = "h.example"
	class := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: ingress.ClassName},
		Spec: networkingv1.IngressClassSpec{Controller: ingress.ControllerName}}
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "app", UID: "u1"},
		Spec: networkingv1.IngressSpec{IngressClassName: ptr(ingress.ClassName), Rules: []networkingv1.IngressRule{{Host: host}}}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tuna-system", Name: keysecret.HostName(host)},
		Data: map[string][]byte{keysecret.KeyNamespaces: []byte("a")}}
	kube := crfake.NewClientBuilder().WithScheme(s).WithObjects(class, ing, secret).
		WithIndex(&networkingv1.Ingress{}, pubhost.Index, ingress.Source.IndexHosts).Build()
	r := &Reconciler{Client: kube, Reader: kube, Namespace: "tuna-system",
		Registry: agent.NewRegistry(logr.Discard(), session.DefaultBackoff, nil, nil)}
	req := pubhost.Request(host)

	res, err := r.Reconcile(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != 100*time.Millisecond {
		t.Errorf("a host only namespace b publishes, under a key for namespace a: look again in %v, want 100ms", res.RequeueAfter)
	}
	r.othersSince.Store(host, time.Now().Add(-time.Hour))
	if res, _ := r.Reconcile(context.Background(), req); res.RequeueAfter != 30*time.Second {
		t.Errorf("after an hour's wait: look again in %v, want the resync period 30s", res.RequeueAfter)
	}
	if err := kube.Delete(context.Background(), ing); err != nil {
		t.Fatal(err)
	}
	if res, _ := r.Reconcile(context.Background(), req); res.RequeueAfter != 0 {
		t.Errorf("a host nobody publishes: look again in %v, want never", res.RequeueAfter)
	}
	if _, waiting := r.othersSince.Load(host); waiting {
		t.Error("the wait is not forgotten once nobody publishes the host")
	}
}
