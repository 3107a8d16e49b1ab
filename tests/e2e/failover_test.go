package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
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

// leaseDuration is the controller's lease: a standby takes over from a
// leader that released it within it, by far.
var leaseDuration = app.DefaultLeaderElection.LeaseDuration

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
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "before", ns+"-before", "http://web:8080")))
	waitReady(t, key(ns, "before"), metav1.ConditionTrue, tunav1.ReasonConnected)
	leader := holder(t)
	require.NotEmpty(t, leader, "the leading controller holds the lease")

	standby := startController(elected)
	defer func() { assert.NoError(t, standby.Stop()) }()

	stopFirst = false
	require.NoError(t, first.Stop())
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "after", ns+"-after", "http://web:8080")))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		now := holder(t)
		assert.NotEmpty(c, now, "nobody holds the lease")
		assert.NotEqual(c, leader, now, "the stopped leader still holds the lease")
	}, leaseDuration, 50*time.Millisecond, "the standby did not take the lease within the lease duration")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var tun tunav1.Tunnel
		require.NoError(c, env.CP.Client.Get(ctx, key(ns, "after"), &tun))
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
	err := env.CP.Client.Get(context.Background(), types.NamespacedName{Namespace: harness.OperatorNamespace, Name: controllerLease}, &l)
	if apierrors.IsNotFound(err) || l.Spec.HolderIdentity == nil {
		return ""
	}
	require.NoError(t, err)
	return *l.Spec.HolderIdentity
}

// controllerLease is the controller's leader election id.
const controllerLease = app.ControllerLeaderID

// The leader is the shipped binary in a process of its own, killed with
// SIGKILL: it releases nothing, and the standby (another process) takes
// the lease once it has lapsed, within the bound the chart states
// (leaseDuration + 4.4 × retryPeriod), and issues keys. The test logs how
// long it took; docs/benchmarks.md has the figures of several runs.
func TestControllerFailoverAfterSIGKILL(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	stopController(t)
	dir := t.TempDir()
	bin, err := harness.BuildOperator(dir)
	require.NoError(t, err)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, env.CP.WriteKubeconfigAs(kubeconfig, env.IDs.Controller.Impersonate))
	start := func(name string) *harness.Process {
		t.Helper()
		p, err := harness.StartControllerProcess(bin, kubeconfig, filepath.Join(dir, name+".log"), env.Edge, env.Edge.OperatorKey)
		require.NoError(t, err)
		stopAtEnd(t, p, "controller "+name)
		return p
	}
	first := start("first")
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "before", ns+"-before", "http://web:8080")))
	waitKeyIssued(t, key(ns, "before"), metav1.ConditionTrue, tunav1.ReasonKeyIssued)
	leader := holder(t)
	require.NotEmpty(t, leader, "the only controller leads")
	standby := start("standby")
	// The standby looks at the lease before the leader dies, as one that
	// has run for a while does.
	require.Eventually(t, func() bool {
		log, _ := os.ReadFile(standby.Log)
		return strings.Contains(strings.ToLower(string(log)), "attempting to acquire leader lease")
	}, wait, 20*time.Millisecond, "the standby never tried to acquire the lease")

	killed := time.Now()
	require.NoError(t, first.Kill())
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "after", ns+"-after", "http://web:8080")))
	le := app.DefaultLeaderElection
	// The bound holds for the election; calls to a loaded apiserver add
	// their time, which the slack covers.
	const slack = 5 * time.Second
	var took time.Duration
	require.Eventually(t, func() bool {
		now := holder(t)
		took = time.Since(killed)
		return now != "" && now != leader
	}, le.TakeoverBound()+slack, 20*time.Millisecond, "the standby did not take the lease within %v + %v", le.TakeoverBound(), slack)
	waitKeyIssued(t, key(ns, "after"), metav1.ConditionTrue, tunav1.ReasonKeyIssued)
	serving := time.Since(killed)
	t.Logf("leader SIGKILLed: the standby led after %v and issued a new Tunnel's key after %v (lease %v, renew deadline %v, retry %v: bound %v)",
		took.Round(10*time.Millisecond), serving.Round(10*time.Millisecond), le.LeaseDuration, le.RenewDeadline, le.RetryPeriod, le.TakeoverBound())
	assert.GreaterOrEqual(t, took, le.LeaseDuration-le.RetryPeriod, "the standby cannot take a lease before it lapses")
	waitReady(t, key(ns, "after"), metav1.ConditionTrue, tunav1.ReasonConnected)
}
