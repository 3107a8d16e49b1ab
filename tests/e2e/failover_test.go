package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// leaseDuration is controller-runtime's default lease, which the
// controller keeps: a standby must take over within it.
const leaseDuration = 15 * time.Second

// Two controller replicas with leader election, as the chart runs them:
// the first leads; when it stops, the standby takes the lease and
// reconciles a new Tunnel within the lease duration.
func TestControllerFailover(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	stopController(t)
	elected := func(o *app.ControllerOptions) { o.LeaderElection = true }

	first := startController(elected)
	stopFirst := true
	defer func() {
		if stopFirst {
			assert.NoError(t, first.Stop())
		}
	}()
	// Only the first replica runs: the Tunnel getting its key shows it leads.
	require.NoError(t, env.cp.Client.Create(ctx, httpTunnel(ns, "before", ns+"-before", "http://web:8080")))
	waitReady(t, key(ns, "before"), metav1.ConditionTrue, tunav1.ReasonConnected)
	leader := holder(t)
	require.NotEmpty(t, leader, "the leading controller holds the lease")

	standby := startController(elected)
	defer func() { assert.NoError(t, standby.Stop()) }()

	stopFirst = false
	require.NoError(t, first.Stop())
	require.NoError(t, env.cp.Client.Create(ctx, httpTunnel(ns, "after", ns+"-after", "http://web:8080")))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		now := holder(t)
		assert.NotEmpty(c, now, "nobody holds the lease")
		assert.NotEqual(c, leader, now, "the stopped leader still holds the lease")
	}, leaseDuration, 50*time.Millisecond, "the standby did not take the lease within the lease duration")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var tun tunav1.Tunnel
		require.NoError(c, env.cp.Client.Get(ctx, key(ns, "after"), &tun))
		cond := status.Find(tun.Status.Conditions, tunav1.ConditionKeyIssued)
		require.NotNil(c, cond, "no KeyIssued condition yet")
		assert.Equal(c, metav1.ConditionTrue, cond.Status, "%s: %s", cond.Reason, cond.Message)
	}, leaseDuration, 50*time.Millisecond, "the standby controller did not take over within the lease duration")
	waitReady(t, key(ns, "after"), metav1.ConditionTrue, tunav1.ReasonConnected)
}

// holder is who holds the controller's leader election lease ("" if none).
func holder(t *testing.T) string {
	t.Helper()
	var l coordinationv1.Lease
	err := env.cp.Client.Get(context.Background(), types.NamespacedName{Namespace: harness.OperatorNamespace, Name: controllerLease}, &l)
	if apierrors.IsNotFound(err) || l.Spec.HolderIdentity == nil {
		return ""
	}
	require.NoError(t, err)
	return *l.Spec.HolderIdentity
}

// controllerLease is the controller's leader election id.
const controllerLease = "tuna-controller.k8s.tuna.am"
