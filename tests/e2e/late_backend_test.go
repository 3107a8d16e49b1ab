package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// hostResync is how often the agent re-resolves every host's Services on
// its own (hosttunnel.Reconciler.Resync's default): a backend served
// sooner than this after the agent last looked was woken by an event.
const hostResync = 30 * time.Second

// A backendRef to a Service created after its HTTPRoute is served as soon
// as the Service's EndpointSlice appears, not at the agent's next resync:
// the agent may not watch Services, so the slice (the EndpointSlice
// controller's for a Service with a selector, a hand-written one for a
// Service without, as the Gateway API conformance suite's
// HTTPRouteServiceTypes writes them) is what tells it the Service came.
// The agent first answers 500, having found no Service.
func TestGatewayBackendCreatedAfterRoute(t *testing.T) {
	ctx := context.Background()
	ensureGatewayClass(t)
	ns := namespace(t)
	host := reserve(t, ns, "gw")
	require.NoError(t, env.CP.Client.Create(ctx, httpGateway(ns, "gw", host)))
	rt := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
		Rules:           []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "late", 8080, 1)}}},
	}}
	require.NoError(t, env.CP.Client.Create(ctx, rt))
	// The agent cannot resolve the route before it exists: its next
	// resync comes hostResync after this at the earliest.
	routeCreated := time.Now()
	waitRoute(t, key(ns, "late"), "Accepted", "BackendNotFound")
	waitGateway(t, key(ns, "gw"), "Programmed", metav1.ConditionTrue, "Programmed")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := get(t, "http://"+host+"/")
		require.Equal(c, http.StatusInternalServerError, code, "body %s", body)
	}, wait, 50*time.Millisecond, "a backendRef to a missing Service must answer 500")

	serveLateService(t, ns, "late", "http://"+host+"/", routeCreated)
	// The controller may not watch Services either: it looks again soon
	// while a route waits for one (its resync, 30 s, is the wait's whole
	// length).
	waitRoute(t, key(ns, "late"), "Accepted", "ResolvedRefs")
}

// An Ingress path to a Service created after the Ingress, likewise: 503
// (its backend skipped), then served once the Service's slice appears.
func TestIngressBackendCreatedAfterIngress(t *testing.T) {
	ctx := context.Background()
	ensureTunaClass(t)
	ns := namespace(t)
	host := reserve(t, ns, "web")
	require.NoError(t, env.CP.Client.Create(ctx, tunaIngress(ns, "late", rule(host, ingPath{prefix, "/", "late", 8080}))))
	ingressCreated := time.Now()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := get(t, hostURL(host)+"/")
		require.Equal(c, http.StatusServiceUnavailable, code, "body %s", body)
	}, wait, 50*time.Millisecond, "a path to a missing Service must answer 503")
	serveLateService(t, ns, "late", hostURL(host)+"/", ingressCreated)
}

// serveLateService creates the Service name with an echo backend and an
// EndpointSlice of it without endpoints (kube-proxy routes the ClusterIP;
// the slice is what the agent hears of), and requires url to be served by
// it before the agent's resync after the route's creation could have.
func serveLateService(t *testing.T, ns, name, url string, routeCreated time.Time) {
	t.Helper()
	ctx := context.Background()
	echoService(t, ns, name, harness.ServicePort{Name: "first-port", Port: 8080})
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-manual", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("first-port"), Port: ptr(int32(8080)), Protocol: ptr(corev1.ProtocolTCP)}},
	}
	require.NoError(t, env.CP.Client.Create(ctx, slice))
	// Before the resync, a quarter of it to spare: the wake takes well
	// under a second on an idle machine.
	deadline := time.Until(routeCreated.Add(hostResync - hostResync/4))
	require.Greater(t, deadline, time.Duration(0), "the Service was created %v after the route: too late to tell a wake from the resync",
		time.Since(routeCreated))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := get(t, url)
		require.Equal(c, http.StatusOK, code, "body %s", body)
		require.Contains(c, string(body), `"backend":"`+name+`-8080"`)
	}, deadline, 50*time.Millisecond, "the Service's EndpointSlice did not wake the host: served only at the resync, %v after the route", hostResync)
}
