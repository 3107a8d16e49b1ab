package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/ingress"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/keysecret"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/metrics"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// The seed's Ingress (examples/ingress-api-split.yaml): /api to Service
// api by port number, the rest to web by port name, on a reserved Domain.
// The backend sees the public Host and the forwarded headers (R6); the
// host has one key labelled with the cluster and the host; status shows
// the host; events and metrics tell what happened.
func TestIngressExampleAPISplit(t *testing.T) {
	ctx := context.Background()
	ensureTunaClass(t)
	ns := namespace(t)
	echoService(t, ns, "api", harness.ServicePort{Port: 8080})
	echoService(t, ns, "web", harness.ServicePort{Name: "http", Port: 8081})
	applyExample(t, ns, "ingress-api-split.yaml", exampleHosts(ns))
	host := subdomainFor(ns, "my-app") + "." + harness.BaseDomain

	waitBackend(t, hostURL(host)+"/api/users", "api-8080")
	waitBackend(t, hostURL(host)+"/", "web-8081")
	e := getEcho(t, hostURL(host)+"/apix?q=1", "X-Forwarded-For", "203.0.113.9", "X-Forwarded-Host", "evil.example")
	assert.Equal(t, "web-8081", e.Backend, "/apix is not under the prefix /api (R5)")
	assert.Equal(t, "/apix", e.Path)
	assert.Equal(t, host, e.Host, "the backend sees the public Host (R6)")
	assert.Equal(t, []string{host}, e.Header["X-Forwarded-Host"])
	assert.Equal(t, []string{"http"}, e.Header["X-Forwarded-Proto"])
	assert.Equal(t, []string{clientAddr(t).String()}, e.Header["X-Forwarded-For"], "the edge's client address, not the spoofed one")

	k := liveKey(t, host)
	for l, v := range map[string]string{edgeapi.LabelCluster: harness.TestClusterID, edgeapi.LabelKind: "Ingress", edgeapi.LabelHost: host} {
		assert.Equal(t, v, k.Labels[l], "label %s", l)
	}
	assert.NotEmpty(t, k.Labels["k8s.tuna.am/namespaces"], "the key names the digest of the namespaces it serves")
	assert.Equal(t, "http", k.Protocol)
	assert.Equal(t, host, k.Address, "the key may bind only this host")
	assert.Equal(t, edgeapi.Owner(harness.TestClusterID, ns), k.Owner, "the key is issued for the namespace that owns the host")
	var secret corev1.Secret
	require.NoError(t, env.CP.Client.Get(ctx, key(harness.OperatorNamespace, keysecret.HostName(host)), &secret))
	assert.Equal(t, k.ID, string(secret.Data[keysecret.KeyKeyID]), "the agent's Secret holds the host's key")
	assert.Equal(t, ns, string(secret.Data[keysecret.KeyNamespaces]), "only this namespace's Ingresses serve the host")

	waitLoadBalancer(t, ns, "my-app", host)
	var ing networkingv1.Ingress
	require.NoError(t, env.CP.Client.Get(ctx, key(ns, "my-app"), &ing))
	managers := map[string]string{}
	for _, mf := range ing.ManagedFields {
		managers[mf.Manager] = mf.Subresource
	}
	assert.Equal(t, "status", managers["tuna-agent"], "the agent owns the status it wrote (server-side apply)")
	events := waitEvent(t, ns, "my-app", "TunnelConnected", host, k.Session.ID)
	assert.Len(t, events["TunnelConnected"], 1)
	waitEvent(t, ns, "my-app", "RoutesUpdated", "Prefix /api → api:8080", "Prefix / → web:http")

	// Metrics: labels are the host and the route pattern, never the path.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 1.0, testutil.ToFloat64(metrics.IngressRequests.WithLabelValues(host, "Prefix /api", "200")))
		assert.GreaterOrEqual(c, testutil.ToFloat64(metrics.IngressRequests.WithLabelValues(host, "Prefix /", "200")), 2.0)
	}, wait, 50*time.Millisecond)
	assert.Equal(t, 2.0, testutil.ToFloat64(metrics.IngressRoutes.WithLabelValues(host)))
	assert.GreaterOrEqual(t, testutil.ToFloat64(metrics.IngressRouteUpdates.WithLabelValues(host)), 1.0)
	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.TunnelUp.WithLabelValues("", host)), "the host's tunnel is up")
}

// A table of path cases, each checked by a real request through the edge:
// whole-segment prefixes, Exact before Prefix, the longest prefix first,
// ImplementationSpecific as Prefix, a trailing slash in a path, named and
// numbered ports, and the defaultBackend for the rest.
func TestIngressPathMatching(t *testing.T) {
	ctx := context.Background()
	ensureTunaClass(t)
	ns := namespace(t)
	echoService(t, ns, "api", harness.ServicePort{Port: 8080})
	echoService(t, ns, "v2", harness.ServicePort{Name: "http", Port: 8081})
	echoService(t, ns, "exact", harness.ServicePort{Port: 8082})
	echoService(t, ns, "static", harness.ServicePort{Name: "web", Port: 8083})
	echoService(t, ns, "docs", harness.ServicePort{Port: 8084})
	echoService(t, ns, "fallback", harness.ServicePort{Port: 8085})
	host := reserve(t, ns, "paths")
	ing := tunaIngress(ns, "paths", rule(host,
		ingPath{prefix, "/api", "api", 8080},
		ingPath{prefix, "/api/v2", "v2", "http"},
		ingPath{exact, "/exact", "exact", 8082},
		ingPath{prefix, "/exact", "docs", 8084},
		ingPath{implSp, "/static", "static", "web"},
		ingPath{prefix, "/docs/", "docs", 8084},
	))
	ing.Spec.DefaultBackend = &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "fallback",
		Port: networkingv1.ServiceBackendPort{Number: 8085}}}
	require.NoError(t, env.CP.Client.Create(ctx, ing))
	waitBackend(t, hostURL(host)+"/api", "api-8080")

	cases := []struct{ path, backend string }{
		{"/api", "api-8080"},
		{"/api/", "api-8080"},
		{"/api/users", "api-8080"},
		{"/apix", "fallback-8085"},
		{"/api/v2", "v2-8081"},
		{"/api/v2/items/1", "v2-8081"},
		{"/api/v2x", "api-8080"},
		{"/exact", "exact-8082"},
		{"/exact/", "docs-8084"},
		{"/exact/sub", "docs-8084"},
		{"/static/app.css", "static-8083"},
		{"/staticx", "fallback-8085"},
		{"/docs", "docs-8084"},
		{"/docs/guide", "docs-8084"},
		{"/", "fallback-8085"},
		{"/other/page", "fallback-8085"},
		{"/api/../docs/x", "docs-8084"},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.path, "/", "_"), func(t *testing.T) {
			e := getEcho(t, hostURL(host)+tc.path)
			assert.Equal(t, tc.backend, e.Backend, "GET %s", tc.path)
		})
	}
	assert.Equal(t, 7.0, testutil.ToFloat64(metrics.IngressRoutes.WithLabelValues(host)), "six paths and the defaultBackend")
}

// Rules without a host, wildcard hosts and hosts that are not reserved
// domains are skipped with a RuleSkipped event that says why; backends that
// are not Services, missing Services, missing ports and refused Services
// with BackendSkipped. The rest is served, the skipped paths answer 503
// (not a shorter prefix's backend), and each event is recorded once per
// change, never again on resync. Reserving the missing domain later
// publishes its rule.
func TestIngressSkippedRulesAndBackends(t *testing.T) {
	ctx := context.Background()
	ensureTunaClass(t)
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	ext := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ext"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com",
			Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt32(8080)}}}}
	require.NoError(t, env.CP.Client.Create(ctx, ext))
	host := reserve(t, ns, "good")
	unreserved := subdomainFor(ns, "later") + "." + harness.BaseDomain

	good := rule(host,
		ingPath{prefix, "/", "web", 8080},
		ingPath{prefix, "/missing", "missing", 8080},
		ingPath{prefix, "/badport", "web", 9999},
		ingPath{prefix, "/ext", "ext", 8080},
		ingPath{prefix, "/bucket", "web", 8080},
	)
	good.HTTP.Paths[4].Backend = networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{
		APIGroup: ptrTo("storage.example.com"), Kind: "Bucket", Name: "assets"}}
	ing := tunaIngress(ns, "mixed",
		rule("", ingPath{prefix, "/", "web", 8080}),
		rule("*.example.com", ingPath{prefix, "/", "web", 8080}),
		rule(unreserved, ingPath{prefix, "/", "web", 8080}),
		good,
	)
	require.NoError(t, env.CP.Client.Create(ctx, ing))

	waitBackend(t, hostURL(host)+"/", "web-8080")
	code, body := get(t, hostURL(host)+"/missing/thing")
	assert.Equal(t, http.StatusServiceUnavailable, code, "a skipped backend's paths answer 503, not the / backend: %s", body)
	assert.Contains(t, string(body), "Prefix /missing")
	assert.NotContains(t, string(body), "missing:8080", "Service names stay in the events")

	waitEvent(t, ns, "mixed", "RuleSkipped", "rule 1", "no host")
	waitEvent(t, ns, "mixed", "RuleSkipped", "rule 2", "wildcard host *.example.com")
	waitEvent(t, ns, "mixed", "RuleSkipped", unreserved, "not a reserved domain", "spec.subdomain: "+subdomainFor(ns, "later"))
	waitEvent(t, ns, "mixed", "BackendSkipped", "Prefix /missing", "Service "+ns+"/missing does not exist")
	waitEvent(t, ns, "mixed", "BackendSkipped", "Prefix /badport", "has no port 9999")
	waitEvent(t, ns, "mixed", "BackendSkipped", "Prefix /ext", "ExternalName", "allowExternalUpstreams")
	waitEvent(t, ns, "mixed", "BackendSkipped", "Prefix /bucket", "Bucket/assets is not a Service")
	assert.Empty(t, hostKeys(t, unreserved), "no key for a host that is not reserved")
	waitLoadBalancer(t, ns, "mixed", host)

	// Ten changes that change nothing (annotations wake both components),
	// then one that does; the controller also re-checks the unreserved host
	// on every resync (a 404 from the edge's GET /v1/domains/{name}).
	checks := func() float64 {
		return testutil.ToFloat64(metrics.EdgeAPICalls.WithLabelValues("GET /v1/domains/{id}", "4xx"))
	}
	before := checks()
	for i := range 10 {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"touch":"`+string(rune('a'+i))+`"}}}`))
		require.NoError(t, env.CP.Client.Patch(ctx, ing, patch))
	}
	updateIngress(t, ns, "mixed", func(ing *networkingv1.Ingress) {
		ing.Spec.Rules[3].HTTP.Paths = append(ing.Spec.Rules[3].HTTP.Paths, networkingv1.HTTPIngressPath{
			Path: "/new", PathType: &prefix, Backend: serviceBackend("web", 8080)})
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Len(c, ingressEvents(c, ns, "mixed")["RoutesUpdated"], 2, "the real change is reported")
	}, wait, 50*time.Millisecond)
	require.Eventually(t, func() bool { return checks() >= before+2 }, wait, 50*time.Millisecond,
		"the controller re-checks the unreserved host on resync")
	got := ingressEvents(t, ns, "mixed")
	assert.Len(t, got["RuleSkipped"], 3, "each event once per change, none on resync: %v", got["RuleSkipped"])
	assert.Len(t, got["BackendSkipped"], 4, "%v", got["BackendSkipped"])
	assert.Len(t, got["TunnelConnected"], 1)

	// Reserving the missing domain publishes its rule.
	require.NoError(t, env.CP.Client.Create(ctx, domain(ns, "later", subdomainFor(ns, "later"), "")))
	waitBackend(t, hostURL(unreserved)+"/", "web-8080")
	waitLoadBalancer(t, ns, "mixed", host, unreserved)
	assert.Len(t, ingressEvents(t, ns, "mixed")["RuleSkipped"], 3, "no new RuleSkipped once the host is reserved")
}

func ptrTo[T any](v T) *T { return &v }

// Deleting the Ingress stops its host: the key is revoked on the edge, its
// Secret deleted, the host no longer reaches the backend, and the Ingress
// gets TunnelStopped.
func TestIngressDeleteStopsHostAndRevokesKey(t *testing.T) {
	ctx := context.Background()
	ensureTunaClass(t)
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	host := reserve(t, ns, "gone")
	require.NoError(t, env.CP.Client.Create(ctx, tunaIngress(ns, "gone", rule(host, ingPath{prefix, "/", "web", 8080}))))
	waitBackend(t, hostURL(host)+"/", "web-8080")
	k := liveKey(t, host)
	waitEvent(t, ns, "gone", "TunnelConnected", host)

	var ing networkingv1.Ingress
	require.NoError(t, env.CP.Client.Get(ctx, key(ns, "gone"), &ing))
	require.NoError(t, env.CP.Client.Delete(ctx, &ing))

	api := env.Edge.Client(env.Edge.AdminKey)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := api.GetTunnelKey(ctx, k.ID)
		assert.True(c, apiwire.IsNotFound(err), "the key is revoked, got %v", err)
		err = env.CP.Client.Get(ctx, key(harness.OperatorNamespace, keysecret.HostName(host)), &corev1.Secret{})
		assert.True(c, client.IgnoreNotFound(err) == nil && err != nil, "the key Secret is deleted, got %v", err)
	}, wait, 50*time.Millisecond)
	code, body := get(t, hostURL(host)+"/")
	assert.NotEqual(t, http.StatusOK, code, "the host is no longer served: %s", body)
	assert.NotContains(t, string(body), "web-8080")
	waitEvent(t, ns, "gone", "TunnelStopped", host, "no longer served")
	assert.Empty(t, hostKeys(t, host))
}

// Ingresses without a class are served once the tuna IngressClass is the
// default (R8); until then they are not.
func TestIngressDefaultClass(t *testing.T) {
	ctx := context.Background()
	ensureTunaClass(t)
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	classless, classed := reserve(t, ns, "classless"), reserve(t, ns, "classed")

	none := tunaIngress(ns, "classless", rule(classless, ingPath{prefix, "/", "web", 8080}))
	none.Spec.IngressClassName = nil
	require.NoError(t, env.CP.Client.Create(ctx, none))
	require.NoError(t, env.CP.Client.Create(ctx, tunaIngress(ns, "classed", rule(classed, ingPath{prefix, "/", "web", 8080}))))
	// The classed Ingress, created after, is served: both were seen.
	waitBackend(t, hostURL(classed)+"/", "web-8080")
	liveKey(t, classed)
	assert.Empty(t, hostKeys(t, classless), "no key for an Ingress without class while tuna is not the default")
	require.NoError(t, env.CP.Client.Get(ctx, key(ns, "classless"), none))
	assert.Nil(t, none.Spec.IngressClassName)
	assert.Empty(t, none.Status.LoadBalancer.Ingress)

	setDefault := func(on bool) {
		var ic networkingv1.IngressClass
		require.NoError(t, env.CP.Client.Get(ctx, key("", ingress.ClassName), &ic))
		if on {
			metav1.SetMetaDataAnnotation(&ic.ObjectMeta, networkingv1.AnnotationIsDefaultIngressClass, "true")
		} else {
			delete(ic.Annotations, networkingv1.AnnotationIsDefaultIngressClass)
		}
		require.NoError(t, env.CP.Client.Update(ctx, &ic))
	}
	setDefault(true)
	t.Cleanup(func() { setDefault(false) })
	waitBackend(t, hostURL(classless)+"/", "web-8080")
	waitLoadBalancer(t, ns, "classless", classless)

	// A new Ingress without class gets the default class at admission.
	later := reserve(t, ns, "later")
	l := tunaIngress(ns, "later", rule(later, ingPath{prefix, "/", "web", 8080}))
	l.Spec.IngressClassName = nil
	require.NoError(t, env.CP.Client.Create(ctx, l))
	waitBackend(t, hostURL(later)+"/", "web-8080")

	// No longer the default: the classless Ingress stops.
	setDefault(false)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Empty(c, hostKeys(c, classless))
	}, wait, 50*time.Millisecond)
	waitLoadBalancer(t, ns, "classless")
}
