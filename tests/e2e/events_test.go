package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// reasons counts the events recorded for the Tunnel, by reason.
func reasons(t *testing.T, ns, name string) map[string]int32 {
	t.Helper()
	var list eventsv1.EventList
	require.NoError(t, env.cp.Client.List(context.Background(), &list, client.InNamespace(ns)))
	out := map[string]int32{}
	for _, e := range list.Items {
		if e.Regarding.Kind == "Tunnel" && e.Regarding.Name == name {
			n := int32(1)
			if e.Series != nil {
				n = e.Series.Count
			}
			out[e.Reason] += n
		}
	}
	return out
}

// Events mark transitions only: one Connected, one warning when the tunnel
// stops being Ready, none for reconciles that change nothing.
func TestEventsOnTransitionsOnly(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	require.NoError(t, env.cp.Client.Create(ctx, httpTunnel(ns, "web", ns, "http://web:8080")))
	tun := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, int32(1), reasons(t, ns, "web")["Connected"])
	}, wait, 50*time.Millisecond)

	// Ten reconciles that change nothing (an annotation wakes the agent).
	for i := range 10 {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"touch":"%d"}}}`, i)
		require.NoError(t, env.cp.Client.Patch(ctx, tun, client.RawPatch(types.MergePatchType, []byte(patch))))
	}
	// Then a real transition, whose event proves the reconciles ran.
	tun.Spec.Upstream.URL = "http://missing:8080"
	require.NoError(t, env.cp.Client.Update(ctx, tun))
	waitReady(t, key(ns, "web"), metav1.ConditionFalse, tunav1.ReasonUpstreamNotFound)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, int32(1), reasons(t, ns, "web")[tunav1.ReasonUpstreamNotFound])
	}, wait, 50*time.Millisecond)
	assert.Equal(t, int32(1), reasons(t, ns, "web")["Connected"], "no event for reconciles that change nothing")
}
