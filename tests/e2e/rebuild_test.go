package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// A cluster that is rebuilt (a new control plane: another etcd, another
// kube-system UID) with the same cluster id finds the Domains it kept with
// reclaimPolicy Retain still its own: Reserved, not adopted, and the
// reclaimPolicy its new Domain says is honoured. Rebuilt with another
// cluster id, it finds them owned by the old id, until the edge's
// administrator hands them over.
func TestRetainedDomainSurvivesARebuild(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	admin := env.Edge.Client(env.Edge.AdminKey)
	same, other := subdomainFor(ns, "same"), subdomainFor(ns, "other")
	for _, sub := range []string{same, other} {
		require.NoError(t, env.CP.Client.Create(ctx, domain(ns, sub, sub, tunav1.ReclaimRetain)))
		waitDomain(t, ns, sub, metav1.ConditionTrue, tunav1.ReasonReserved)
		deleteAndWait(t, &tunav1.Domain{}, key(ns, sub))
		d, err := admin.GetDomain(ctx, sub+"."+harness.BaseDomain)
		require.NoError(t, err, "reclaimPolicy Retain keeps the domain")
		require.Equal(t, harness.TestClusterID+"/"+ns, d.Owner)
	}

	// The rebuilt cluster: a control plane of its own, with the chart's
	// identities, and its own controller against the same edge.
	rebuilt, err := harness.StartControlPlane()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, rebuilt.Stop()) })
	for _, n := range []string{harness.OperatorNamespace, ns} {
		_, err := rebuilt.Namespace(ctx, n)
		require.NoError(t, err)
	}
	ids, err := rebuilt.ChartIdentities(ctx)
	require.NoError(t, err)
	domainIn := func(sub string, want metav1.ConditionStatus, reason string) *tunav1.Domain {
		t.Helper()
		require.NoError(t, rebuilt.Client.Create(ctx, domain(ns, sub, sub, tunav1.ReclaimDelete)))
		var d tunav1.Domain
		waitConditionIn(t, rebuilt, &d, key(ns, sub), func() []metav1.Condition { return d.Status.Conditions }, want, reason)
		return &d
	}

	// Same cluster id: the domain is still its own.
	sameID := harness.StartController(ids.Controller, env.Edge, func(o *app.ControllerOptions) {
		o.DNSVerifyInterval, o.ReservationResync = dnsVerifyInterval, reservationResync
	})
	d := domainIn(same, metav1.ConditionTrue, tunav1.ReasonReserved)
	assert.False(t, d.Status.Adopted, "its own retained domain is taken back, not adopted")
	require.NoError(t, rebuilt.Client.Delete(ctx, d))
	waitGoneIn(t, rebuilt, &tunav1.Domain{}, key(ns, same))
	_, err = admin.GetDomain(ctx, same+"."+harness.BaseDomain)
	assert.True(t, apiwire.IsNotFound(err), "the new Domain's reclaimPolicy Delete releases it, got %v", err)
	require.NoError(t, sameID.Stop())

	// Another cluster id (with its key bound to it): the old id owns the
	// domain, until the administrator hands it over.
	const newID = "rebuilt-cluster"
	bound, err := admin.CreateAPIKey(ctx, apiwire.CreateAPIKey{Name: newID, Scopes: []string{apiwire.ScopeWrite}, OwnerPrefix: newID})
	require.NoError(t, err)
	newController := harness.StartController(ids.Controller, env.Edge, func(o *app.ControllerOptions) {
		o.DNSVerifyInterval, o.ReservationResync = dnsVerifyInterval, reservationResync
		o.ClusterID, o.APIKey = newID, bound.Key
	})
	t.Cleanup(func() { assert.NoError(t, newController.Stop()) })
	d = domainIn(other, metav1.ConditionFalse, tunav1.ReasonAddressOwned)
	assert.Contains(t, readyMessage(d.Status.Conditions), other+"."+harness.BaseDomain+" belongs to owner "+harness.TestClusterID+"/"+ns)
	assert.Contains(t, readyMessage(d.Status.Conditions), "tuna-edge owners transfer --from "+harness.TestClusterID+" --to "+newID)

	res, err := admin.TransferOwners(ctx, harness.TestClusterID+"/"+ns, newID+"/"+ns)
	require.NoError(t, err)
	assert.Contains(t, res.Domains, other+"."+harness.BaseDomain)
	var now tunav1.Domain
	waitConditionIn(t, rebuilt, &now, key(ns, other), func() []metav1.Condition { return now.Status.Conditions }, metav1.ConditionTrue, tunav1.ReasonReserved)
	assert.False(t, now.Status.Adopted)
	got, err := admin.GetDomain(ctx, other+"."+harness.BaseDomain)
	require.NoError(t, err)
	assert.Equal(t, newID+"/"+ns, got.Owner)
	require.NoError(t, rebuilt.Client.Delete(ctx, &now))
	waitGoneIn(t, rebuilt, &tunav1.Domain{}, key(ns, other))
	_, err = admin.GetDomain(ctx, other+"."+harness.BaseDomain)
	assert.True(t, apiwire.IsNotFound(err), "the handed-over domain is the new cluster's to release, got %v", err)
}
