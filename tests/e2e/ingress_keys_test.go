package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/keysecret"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// A host key revoked on the edge by hand is replaced: the controller
// notices on its next resync, hands a new key over, and the agent
// reconnects the host with it. The Ingress tells the story in events.
func TestIngressKeyRevokedByHandIsReplaced(t *testing.T) {
	ctx := context.Background()
	ensureTunaClass(t)
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	host := reserve(t, ns, "rekey")
	require.NoError(t, env.CP.Client.Create(ctx, tunaIngress(ns, "rekey", rule(host, ingPath{prefix, "/", "web", 8080}))))
	waitBackend(t, hostURL(host)+"/", "web-8080")
	old := liveKey(t, host)

	require.NoError(t, env.Edge.Client(env.Edge.AdminKey).RevokeTunnelKey(ctx, old.ID))
	var now apiwire.TunnelKey
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		keys := hostKeys(c, host)
		require.Len(c, keys, 1)
		require.NotEqual(c, old.ID, keys[0].ID, "a new key")
		require.NotNil(c, keys[0].Session, "the agent connected with it")
		now = keys[0]
	}, wait, 50*time.Millisecond)
	assert.NotEqual(t, old.Session.ID, now.Session.ID)
	waitBackend(t, hostURL(host)+"/", "web-8080")
	// The stop is told either as "is down" (the agent saw the session end)
	// or as "cannot connect (KeyRevoked)" (its first look found the key
	// refused): which one depends on when the agent's reconcile runs.
	waitEvent(t, ns, "rekey", "TunnelStopped", host)
	waitEvent(t, ns, "rekey", "TunnelConnected", now.Session.ID)
}

// Keys of hosts whose Ingresses were deleted while the controller was
// down are revoked when it comes back, with their Secret; another
// cluster's Ingress keys are never touched (R19).
func TestIngressOrphanKeyRevokedAfterControllerDowntime(t *testing.T) {
	ctx := context.Background()
	ensureTunaClass(t)
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	host := reserve(t, ns, "orphan")
	require.NoError(t, env.CP.Client.Create(ctx, tunaIngress(ns, "orphan", rule(host, ingPath{prefix, "/", "web", 8080}))))
	waitBackend(t, hostURL(host)+"/", "web-8080")
	k := liveKey(t, host)
	api := env.Edge.Client(env.Edge.AdminKey)
	// Another cluster cannot get a key for this namespace's host (it is
	// another owner), so its key is for an address of its own.
	foreign, err := api.CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "http", Address: subdomainFor(ns, "elsewhere"),
		Owner: "another-cluster/" + ns, Labels: map[string]string{edgeapi.LabelCluster: "another-cluster", edgeapi.LabelKind: "Ingress", edgeapi.LabelHost: host}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = api.RevokeTunnelKey(ctx, foreign.ID) })

	require.NoError(t, env.Controller.Stop())
	deleteAndWait(t, &networkingv1.Ingress{}, key(ns, "orphan"))
	waitEvent(t, ns, "orphan", "TunnelStopped", host) // the agent still runs and closes the host
	_, err = api.GetTunnelKey(ctx, k.ID)
	require.NoError(t, err, "the key outlives its Ingress while the controller is down")

	env.Controller = startController()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := api.GetTunnelKey(ctx, k.ID)
		assert.True(c, apiwire.IsNotFound(err), "orphan key still there: %v", err)
		err = env.CP.Client.Get(ctx, key(harness.OperatorNamespace, keysecret.HostName(host)), &corev1.Secret{})
		assert.True(c, apierrors.IsNotFound(err), "its Secret is deleted, got %v", err)
	}, wait, 100*time.Millisecond)
	_, err = api.GetTunnelKey(ctx, foreign.ID)
	assert.NoError(t, err, "another cluster's key is never touched")
}

// A host another tunnel already holds cannot be bound: the Ingress says
// so with a warning, once, and its status lists no hostname.
func TestIngressHostTakenByTunnel(t *testing.T) {
	ctx := context.Background()
	ensureTunaClass(t)
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	host := reserve(t, ns, "taken")
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "first", subdomainFor(ns, "taken"), "http://web:8080")))
	waitReady(t, key(ns, "first"), metav1.ConditionTrue, tunav1.ReasonConnected)

	require.NoError(t, env.CP.Client.Create(ctx, tunaIngress(ns, "second", rule(host, ingPath{prefix, "/", "web", 8080}))))
	waitEvent(t, ns, "second", "TunnelStopped", host, "cannot connect (AddressTaken)")
	// The agent retries with backoff meanwhile; the warning is not repeated.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		keys := hostKeys(c, host)
		require.Len(c, keys, 1)
		assert.Nil(c, keys[0].Session, "the Ingress's key has no session: the Tunnel holds the host")
	}, wait, 50*time.Millisecond)
	assert.Len(t, ingressEvents(t, ns, "second")["TunnelStopped"], 1)
	assert.Empty(t, ingressEvents(t, ns, "second")["TunnelConnected"])
	waitLoadBalancer(t, ns, "second")

	// Once the Tunnel goes, the Ingress takes the host.
	deleteAndWait(t, &tunav1.Tunnel{}, key(ns, "first"))
	waitEvent(t, ns, "second", "TunnelConnected", host)
	waitLoadBalancer(t, ns, "second", host)
}

// A host reserved on the account (by hand or by another cluster, with no
// Domain resource) may be published too (R3). A custom domain must be
// verified first; then its status hostname is the domain's CNAME target,
// the record external-dns should create.
func TestIngressHostsReservedOnTheAccount(t *testing.T) {
	ctx := context.Background()
	ensureTunaClass(t)
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	api := env.Edge.Client(env.Edge.AdminKey)
	sub, err := api.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: subdomainFor(ns, "byhand")})
	require.NoError(t, err)
	custom, err := api.CreateDomain(ctx, apiwire.CreateDomain{Domain: "shop-" + tag(ns) + ".example.test"})
	require.NoError(t, err)
	require.False(t, custom.Verified)
	t.Cleanup(func() {
		_ = api.DeleteDomain(ctx, sub.Name, "")
		_ = api.DeleteDomain(ctx, custom.Name, "")
	})

	require.NoError(t, env.CP.Client.Create(ctx, tunaIngress(ns, "account",
		rule(sub.Name, ingPath{prefix, "/", "web", 8080}),
		rule(custom.Name, ingPath{prefix, "/", "web", 8080}),
	)))
	waitBackend(t, hostURL(sub.Name)+"/", "web-8080")
	waitEvent(t, ns, "account", "RuleSkipped", custom.Name, "not verified")
	assert.Empty(t, hostKeys(t, custom.Name))

	var cname string
	for _, r := range custom.DNSRecords {
		switch r.Type {
		case "CNAME":
			env.dns.SetCNAME(r.Name, r.Value)
			cname = r.Value
		case "TXT":
			env.dns.SetTXT(r.Name, r.Value)
		}
	}
	require.NotEmpty(t, cname)
	_, err = api.VerifyDomain(ctx, custom.Name, "")
	require.NoError(t, err)
	waitBackend(t, hostURL(custom.Name)+"/", "web-8080")
	waitLoadBalancer(t, ns, "account", sub.Name, cname)
}
