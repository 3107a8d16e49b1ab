package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// Two Ingresses sharing a host (examples/ingress-shared-host.yaml) are
// merged into one tunnel. A third, newer one that claims /api loses it to
// the older Ingress even though its name sorts first, and gets a
// PathConflict event naming the winner; its other path is served. When the
// older one goes, the newer one's /api takes over, on the same key and the
// same edge session.
func TestIngressSharedHostMerge(t *testing.T) {
	ctx := context.Background()
	ensureTunaClass(t)
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	echoService(t, ns, "api", harness.ServicePort{Port: 8080})
	echoService(t, ns, "late", harness.ServicePort{Port: 8080})
	applyExample(t, ns, "ingress-shared-host.yaml", exampleHosts(ns))
	host := subdomainFor(ns, "shop") + "." + harness.BaseDomain

	waitBackend(t, hostURL(host)+"/", "web-8080")
	waitBackend(t, hostURL(host)+"/api/cart", "api-8080")
	k := liveKey(t, host)
	waitEvent(t, ns, "shop-web", "RoutesUpdated", "Prefix / → web:8080")
	waitEvent(t, ns, "shop-api", "RoutesUpdated", "Prefix /api → api:8080")
	waitLoadBalancer(t, ns, "shop-web", host)
	waitLoadBalancer(t, ns, "shop-api", host)

	// Creation times have a one-second resolution: let the clock pass the
	// second of the example's Ingresses, so "newer" is newer by age, not
	// only by name.
	var older networkingv1.Ingress
	require.NoError(t, env.CP.Client.Get(ctx, key(ns, "shop-api"), &older))
	require.Eventually(t, func() bool {
		return time.Now().Truncate(time.Second).After(older.CreationTimestamp.Time)
	}, 2*time.Second, 10*time.Millisecond)
	late := tunaIngress(ns, "aaa-late", rule(host,
		ingPath{prefix, "/api", "late", 8080},
		ingPath{prefix, "/late", "late", 8080},
	))
	require.NoError(t, env.CP.Client.Create(ctx, late))
	require.True(t, late.CreationTimestamp.After(older.CreationTimestamp.Time), "the late Ingress is younger")

	waitBackend(t, hostURL(host)+"/late/x", "late-8080")
	assert.Equal(t, "api-8080", getEcho(t, hostURL(host)+"/api/cart").Backend, "the older Ingress keeps /api")
	waitEvent(t, ns, "aaa-late", "PathConflict", "Prefix /api", "Ingress "+ns+"/shop-api, which is older and wins")
	waitEvent(t, ns, "aaa-late", "RoutesUpdated", "Prefix /late → late:8080")
	waitLoadBalancer(t, ns, "aaa-late", host)
	assert.Empty(t, ingressEvents(t, ns, "shop-api")["PathConflict"], "the winner gets no conflict event")

	// The older Ingress goes: the late one's /api takes over.
	deleteAndWait(t, &networkingv1.Ingress{}, key(ns, "shop-api"))
	waitBackend(t, hostURL(host)+"/api/cart", "late-8080")
	assert.Equal(t, "web-8080", getEcho(t, hostURL(host)+"/").Backend)
	after := liveKey(t, host)
	assert.Equal(t, k.ID, after.ID, "the host keeps its key while an Ingress serves it")
	assert.Equal(t, k.Session.ID, after.Session.ID, "merging and unmerging never reconnect the tunnel")
	waitEvent(t, ns, "aaa-late", "RoutesUpdated", "Prefix /api → late:8080", "Prefix /late → late:8080")
	assert.Empty(t, ingressEvents(t, ns, "shop-web")["TunnelStopped"], "the host never stopped")
}
