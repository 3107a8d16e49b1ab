package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// The agent's view of the controller is the controller's own leader
// Lease, read with the agent's rights: live while an elected controller
// runs, over once it stops (it releases the Lease), and not known without
// leader election (no Lease) or for a name no controller holds.
func TestAgentSeesTheControllerByItsLease(t *testing.T) {
	ctx := context.Background()
	asAgent, err := client.New(env.IDs.Agent, client.Options{Scheme: app.Scheme()})
	require.NoError(t, err)
	look := func(name string) time.Time {
		c := &agent.ControllerLease{Reader: asAgent,
			Key: types.NamespacedName{Namespace: harness.OperatorNamespace, Name: name}}
		return c.AliveUntil(ctx, time.Now())
	}
	restartController(t, func(o *app.ControllerOptions) { o.LeaderElection = true })
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.True(c, look(app.ControllerLeaderID).After(time.Now()), "the elected controller's Lease is not live")
	}, leaseDuration, 50*time.Millisecond)
	assert.Zero(t, look("no-such-controller"), "a Lease nobody holds")

	stopController(t)
	assert.Zero(t, look(app.ControllerLeaderID), "the stopped controller released its Lease")
}
