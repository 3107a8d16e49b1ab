package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/keysecret"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// A resource can go without its finalizer having run: a user removes it
// by hand, or the kube-apiserver deletes an object whose finalizer was
// added while the deletion was in flight (kubernetes/kubernetes#77988),
// after which the controller may still issue a key or make a reservation
// for it. Either way nothing it got may outlive it: a Tunnel's key would
// keep its bare subdomain claimed for its namespace until the orphan
// collector's hourly sweep, and a reservation would stay for good.

// The deterministic case: the finalizer is taken off by hand, then the
// Tunnel is deleted. The controller revokes the key and deletes its Secret
// when it sees the Tunnel gone, and another namespace takes the address.
func TestTunnelGoneWithoutFinalizerReleasesItsAddress(t *testing.T) {
	ctx := context.Background()
	owner, next := tenants(t)
	sub := "unfinalized-" + tag(owner)
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(owner, "web", sub, "http://owner:8080")))
	tun := waitReady(t, key(owner, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	require.NotEmpty(t, tun.Status.KeyID)

	deleteWithoutFinalizer(t, &tunav1.Tunnel{}, key(owner, "web"))

	api := env.Edge.Client(env.Edge.AdminKey)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := api.GetTunnelKey(ctx, tun.Status.KeyID)
		assert.True(c, apiwire.IsNotFound(err), "the gone Tunnel's key %s is revoked, got %v", tun.Status.KeyID, err)
		secret := types.NamespacedName{Namespace: harness.OperatorNamespace, Name: keysecret.Name("Tunnel", tun.UID)}
		err = env.CP.Client.Get(ctx, secret, &corev1.Secret{})
		assert.True(c, apierrors.IsNotFound(err), "its key Secret is deleted, got %v", err)
	}, wait, 50*time.Millisecond)

	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(next, "web", sub, "http://attacker:8080")))
	now := waitReady(t, key(next, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	assert.Equal(t, "attacker-8080", getEcho(t, now.Status.URL).Backend)
}

// The racing case, as a GitOps tool or a test suite produces it: Tunnels
// created and deleted at once, one after another. After each is gone the
// address is free for another owner; without the controller's sweep of
// gone Tunnels about one in fifty kept it claimed on a loaded machine.
func TestTunnelChurnLeavesNoClaim(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	sub := "churn-" + tag(ns)
	api := env.Edge.Client(env.Edge.AdminKey)
	for i := range 30 {
		name := fmt.Sprintf("churn-%d", i)
		require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, name, sub, "http://web:8080")))
		deleteAndWait(t, &tunav1.Tunnel{}, key(ns, name))
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			k, err := api.CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "http", Address: sub, Owner: "e2e/another-owner"})
			if !assert.NoError(c, err, "after Tunnel %s is gone another owner may take %s", name, sub) {
				return
			}
			assert.NoError(c, api.RevokeTunnelKey(ctx, k.ID))
		}, wait, 50*time.Millisecond)
	}
}

// Domains and TCPEndpoints that go without their finalizer release their
// reservation as the finalizer would have (reclaimPolicy Delete, not
// adopted): otherwise it would stay on the edge for good, owned by the
// namespace, since no collector sweeps reservations. Another namespace
// then reserves the names. (That an adopted or retained reservation is
// kept is the reclaim rule, unit-tested in reservation's ledger_test.go:
// here nothing could show when the controller is done deciding to keep.)
func TestReservationsGoneWithoutFinalizerAreReleased(t *testing.T) {
	ctx := context.Background()
	ns, next := namespace(t), namespace(t)
	sub, alias := "unfinalized-"+tag(ns), "unfinalized-"+tag(ns)
	require.NoError(t, env.CP.Client.Create(ctx, domain(ns, "web", sub, tunav1.ReclaimDelete)))
	require.NoError(t, env.CP.Client.Create(ctx, &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pg"},
		Spec: tunav1.TCPEndpointSpec{Alias: alias}}))
	d := waitDomain(t, ns, "web", metav1.ConditionTrue, tunav1.ReasonReserved)
	waitEndpoint(t, ns, "pg", tunav1.ReasonReserved)

	deleteWithoutFinalizer(t, &tunav1.Domain{}, key(ns, "web"))
	deleteWithoutFinalizer(t, &tunav1.TCPEndpoint{}, key(ns, "pg"))

	api := env.Edge.Client(env.Edge.AdminKey)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := api.GetDomain(ctx, d.Status.FQDN)
		assert.True(c, apiwire.IsNotFound(err), "domain %s is released, got %v", d.Status.FQDN, err)
		_, err = api.GetTCPEndpoint(ctx, alias)
		assert.True(c, apiwire.IsNotFound(err), "TCP endpoint %s is released, got %v", alias, err)
	}, wait, 50*time.Millisecond)

	require.NoError(t, env.CP.Client.Create(ctx, domain(next, "web", sub, tunav1.ReclaimDelete)))
	require.NoError(t, env.CP.Client.Create(ctx, &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: next, Name: "pg"},
		Spec: tunav1.TCPEndpointSpec{Alias: alias}}))
	t.Cleanup(func() {
		deleteAndWait(t, &tunav1.Domain{}, key(next, "web"))
		deleteAndWait(t, &tunav1.TCPEndpoint{}, key(next, "pg"))
	})
	mine := waitDomain(t, next, "web", metav1.ConditionTrue, tunav1.ReasonReserved)
	assert.False(t, mine.Status.Adopted, "the next namespace reserves the name anew")
	waitEndpoint(t, next, "pg", tunav1.ReasonReserved)
}

// deleteWithoutFinalizer takes the controller's finalizer off obj (read
// into) and deletes it, as `kubectl patch --type=merge -p
// '{"metadata":{"finalizers":null}}'` then `kubectl delete` would. The
// delete is conditional on the patched version, so a finalizer the
// controller adds back in between makes the pair start again.
func deleteWithoutFinalizer(t *testing.T, obj client.Object, k types.NamespacedName) {
	t.Helper()
	ctx := context.Background()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := env.CP.Client.Get(ctx, k, obj)
		if apierrors.IsNotFound(err) {
			return
		}
		require.NoError(c, err)
		patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
		obj.SetFinalizers(nil)
		require.NoError(c, env.CP.Client.Patch(ctx, obj, patch))
		rv := obj.GetResourceVersion()
		require.NoError(c, env.CP.Client.Delete(ctx, obj, client.Preconditions{ResourceVersion: &rv}))
		assert.True(c, apierrors.IsNotFound(env.CP.Client.Get(ctx, k, obj)), "%s is gone", k)
	}, wait, 50*time.Millisecond)
}
