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

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// reasons counts the events recorded for the Tunnel, by reason.
func reasons(t *testing.T, ns, name string) map[string]int32 {
	t.Helper()
	return eventsOf(t, ns, "Tunnel", name, "")
}

// eventsOf counts the events recorded for one object of kind, by reason;
// only those of type typ ("Normal", "Warning") unless typ is empty.
func eventsOf(t require.TestingT, ns, kind, name, typ string) map[string]int32 {
	var list eventsv1.EventList
	require.NoError(t, env.CP.Client.List(context.Background(), &list, client.InNamespace(ns)))
	out := map[string]int32{}
	for _, e := range list.Items {
		if e.Regarding.Kind == kind && e.Regarding.Name == name && (typ == "" || e.Type == typ) {
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
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "web", ns, "http://web:8080")))
	tun := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, int32(1), reasons(t, ns, "web")["Connected"])
	}, wait, 50*time.Millisecond)

	// Ten reconciles that change nothing (an annotation wakes the agent).
	for i := range 10 {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"touch":"%d"}}}`, i)
		require.NoError(t, env.CP.Client.Patch(ctx, tun, client.RawPatch(types.MergePatchType, []byte(patch))))
	}
	// Then a real transition, whose event proves the reconciles ran.
	update(t, tun, func(tun *tunav1.Tunnel) { tun.Spec.Upstream.URL = "http://missing:8080" })
	waitReady(t, key(ns, "web"), metav1.ConditionFalse, tunav1.ReasonUpstreamNotFound)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, int32(1), reasons(t, ns, "web")[tunav1.ReasonUpstreamNotFound])
	}, wait, 50*time.Millisecond)
	assert.Equal(t, int32(1), reasons(t, ns, "web")["Connected"], "no event for reconciles that change nothing")
}

// Domain and TCPEndpoint events come from the reservation controller, one
// per change of Ready: Reserved (Normal) when a TCPEndpoint is reserved,
// and none for the resyncs that follow; a reservation deleted on the edge
// by hand and re-created is told once (ReservationRecreated, a Warning)
// without a second Reserved; Adopted (Normal) for a Domain
// that already existed on the account; the reason as a Warning when the
// edge refuses a Domain.
func TestReservationEvents(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	api := env.Edge.Client(env.Edge.AdminKey)

	alias := "ev-" + tag(ns)
	require.NoError(t, env.CP.Client.Create(ctx, &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pg"},
		Spec: tunav1.TCPEndpointSpec{Alias: alias}}))
	t.Cleanup(func() { deleteAndWait(t, &tunav1.TCPEndpoint{}, key(ns, "pg")) })
	waitEndpoint(t, ns, "pg", tunav1.ReasonReserved)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, map[string]int32{tunav1.ReasonReserved: 1}, eventsOf(c, ns, "TCPEndpoint", "pg", "Normal"))
	}, wait, 50*time.Millisecond)
	require.NoError(t, api.DeleteTCPEndpoint(ctx, alias, ""))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := api.GetTCPEndpoint(ctx, alias)
		assert.NoError(c, err)
	}, wait, 100*time.Millisecond, "a reservation deleted on the edge is re-created")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, map[string]int32{"ReservationRecreated": 1}, eventsOf(c, ns, "TCPEndpoint", "pg", "Warning"))
	}, wait, 50*time.Millisecond, "the re-creation is told once, as a warning")
	waitEndpoint(t, ns, "pg", tunav1.ReasonReserved)
	assert.Equal(t, map[string]int32{tunav1.ReasonReserved: 1}, eventsOf(t, ns, "TCPEndpoint", "pg", "Normal"),
		"no Ready event for resyncs that leave Ready as it was")

	byHand, err := api.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "evd-" + tag(ns)})
	require.NoError(t, err)
	require.NoError(t, env.CP.Client.Create(ctx, domain(ns, "adopted", byHand.Subdomain, tunav1.ReclaimDelete)))
	t.Cleanup(func() { deleteAndWait(t, &tunav1.Domain{}, key(ns, "adopted")) })
	waitDomain(t, ns, "adopted", metav1.ConditionTrue, tunav1.ReasonAdopted)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, map[string]int32{tunav1.ReasonAdopted: 1}, eventsOf(c, ns, "Domain", "adopted", "Normal"))
	}, wait, 50*time.Millisecond)

	require.NoError(t, env.CP.Client.Create(ctx, &tunav1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "refused"},
		Spec: tunav1.DomainSpec{Domain: "b." + tag(ns) + "." + harness.BaseDomain}}))
	t.Cleanup(func() { deleteAndWait(t, &tunav1.Domain{}, key(ns, "refused")) })
	waitDomain(t, ns, "refused", metav1.ConditionFalse, tunav1.ReasonReservationFailed)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, map[string]int32{tunav1.ReasonReservationFailed: 1}, eventsOf(c, ns, "Domain", "refused", "Warning"))
	}, wait, 50*time.Millisecond)
	assert.Empty(t, eventsOf(t, ns, "Domain", "refused", "Normal"))
}
