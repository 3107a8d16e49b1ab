package e2e

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// A replica killed without leaving (SIGKILL, a lost node) leaves its
// status.agents entry behind, still "connected". The entry here is written
// exactly as such a replica wrote it, under its own field manager, and it
// has no Lease (a killed replica's Lease lapses; a deleted one is gone).
// The live replicas remove it, and the merged status counts only them;
// a live replica's entry is never removed, and a replica that stops
// cleanly deletes its Lease.
func TestVanishedReplicaEntryIsRemoved(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ownAgents(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "web", ns+"-web", "http://web:8080")))

	short := func(o *app.AgentOptions) { o.HeartbeatTTL = 3 * time.Second }
	a := poolAgent("pool-a", short)
	t.Cleanup(func() { assert.NoError(t, a.Stop()) })
	b := poolAgent("pool-b", short)
	bStopped := false
	t.Cleanup(func() {
		if !bStopped {
			assert.NoError(t, b.Stop())
		}
	})
	web := waitPool(t, key(ns, "web"), "pool-a", "pool-b")
	for _, replica := range []string{"pool-a", "pool-b"} {
		var lease coordinationv1.Lease
		require.NoError(t, env.CP.Client.Get(ctx, types.NamespacedName{Namespace: harness.OperatorNamespace, Name: agent.LeaseName(replica)}, &lease))
		require.NotNil(t, lease.Spec.HolderIdentity)
		assert.Equal(t, replica, *lease.Spec.HolderIdentity, "the heartbeat Lease of %s", replica)
	}

	ghost := tunav1.TunnelAgentStatus{Name: "pool-ghost", Connected: true, URL: web.Status.URL, SessionID: "gone-long-ago",
		Reason: tunav1.ReasonConnected, Message: "the tunnel is connected and serving " + web.Status.URL}
	entry, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ghost)
	require.NoError(t, err)
	require.NoError(t, status.Apply(ctx, env.CP.Client, tunav1.GroupVersion.WithKind("Tunnel"), key(ns, "web"),
		status.AgentEntryOwner("pool-ghost"), status.Fields{Values: map[string]any{"agents": []any{entry}}}))

	// Removed, and the merged status is that of the two live replicas.
	web = waitPool(t, key(ns, "web"), "pool-a", "pool-b")
	assert.False(t, slices.ContainsFunc(web.Status.Agents, func(e tunav1.TunnelAgentStatus) bool { return e.Name == "pool-ghost" }),
		"the entry of the vanished replica is gone: %+v", web.Status.Agents)
	degraded := meta.FindStatusCondition(web.Status.Conditions, tunav1.ConditionDegraded)
	require.NotNil(t, degraded)
	assert.Equal(t, tunav1.ReasonPoolComplete, degraded.Reason)
	code, _ := get(t, web.Status.URL)
	assert.Equal(t, http.StatusOK, code)

	// A clean stop deletes the Lease at once; the other replica carries on.
	require.NoError(t, b.Stop())
	bStopped = true
	err = env.CP.Client.Get(ctx, types.NamespacedName{Namespace: harness.OperatorNamespace, Name: agent.LeaseName("pool-b")}, &coordinationv1.Lease{})
	assert.True(t, apierrors.IsNotFound(err), "the Lease of a replica that stopped is deleted, got %v", err)
	web = waitPool(t, key(ns, "web"), "pool-a")
	degraded = meta.FindStatusCondition(web.Status.Conditions, tunav1.ConditionDegraded)
	require.NotNil(t, degraded)
	assert.Equal(t, tunav1.ReasonPoolBelowDesired, degraded.Reason, "one of two replicas is live")
}
