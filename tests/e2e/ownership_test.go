package e2e

// The attacker suite, continued: ownership holds on every write, not only
// on create and bind. A resource refused for another owner's address
// releases nothing when it goes, and the operator's key, bound to its
// cluster id, cannot touch another cluster's reservations or keys.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// otherCluster is the owner of addresses another cluster reserved on the
// shared edge.
const otherCluster = "another-cluster"

// eventNote returns the note of the event of reason recorded for the
// object of kind, once there is one.
func eventNote(t *testing.T, ns, kind, name, reason string) string {
	t.Helper()
	var note string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var list eventsv1.EventList
		require.NoError(c, env.CP.Client.List(context.Background(), &list, client.InNamespace(ns)))
		for _, e := range list.Items {
			if e.Regarding.Kind == kind && e.Regarding.Name == name && e.Reason == reason {
				note = e.Note
				return
			}
		}
		assert.Fail(c, "no event", "%s %s/%s has no %s event yet", kind, ns, name, reason)
	}, wait, 50*time.Millisecond)
	return note
}

// A Domain and a TCPEndpoint that were Reserved, whose reservations were
// then deleted on the edge and reserved again by another cluster, show
// AddressOwned; deleting them releases nothing of the other cluster's
// (the finalizer asks for the release as its own namespace, which the edge
// refuses), and an event says why.
func TestRefusedReservationReleasesNothingOfAnotherOwner(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	admin := env.Edge.Client(env.Edge.AdminKey)
	sub, alias := subdomainFor(ns, "taken"), "taken-"+tag(ns)
	fqdn := sub + "." + harness.BaseDomain
	require.NoError(t, env.CP.Client.Create(ctx, domain(ns, "taken", sub, tunav1.ReclaimDelete)))
	require.NoError(t, env.CP.Client.Create(ctx, &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
		Spec: tunav1.TCPEndpointSpec{Alias: alias, ReclaimPolicy: tunav1.ReclaimDelete}}))
	waitDomain(t, ns, "taken", metav1.ConditionTrue, tunav1.ReasonReserved)
	waitEndpoint(t, ns, "taken", tunav1.ReasonReserved)

	// While the controller is down (else it re-creates them at once), the
	// reservations are deleted on the edge and another cluster takes them.
	stopController(t)
	theirs := apiwire.Sharing{Owner: otherCluster + "/shop"}
	require.NoError(t, admin.DeleteDomain(ctx, fqdn, ""))
	require.NoError(t, admin.DeleteTCPEndpoint(ctx, alias, ""))
	_, err := admin.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: sub, Sharing: theirs})
	require.NoError(t, err)
	_, err = admin.CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: alias, Sharing: theirs})
	require.NoError(t, err)
	env.Controller = startController()

	d := waitDomain(t, ns, "taken", metav1.ConditionFalse, tunav1.ReasonAddressOwned)
	assert.Contains(t, readyMessage(d.Status.Conditions), fqdn+" belongs to owner "+theirs.Owner)
	var e tunav1.TCPEndpoint
	waitCondition(t, &e, key(ns, "taken"), func() []metav1.Condition { return e.Status.Conditions }, metav1.ConditionFalse, tunav1.ReasonAddressOwned)

	deleteAndWait(t, &tunav1.Domain{}, key(ns, "taken"))
	deleteAndWait(t, &tunav1.TCPEndpoint{}, key(ns, "taken"))
	got, err := admin.GetDomain(ctx, fqdn)
	require.NoError(t, err, "deleting the refused Domain released the other cluster's domain")
	assert.Equal(t, theirs.Owner, got.Owner)
	ep, err := admin.GetTCPEndpoint(ctx, alias)
	require.NoError(t, err, "deleting the refused TCPEndpoint released the other cluster's endpoint")
	assert.Equal(t, theirs.Owner, ep.Owner)
	assert.Contains(t, eventNote(t, ns, "Domain", "taken", tunav1.ReasonReleaseSkipped),
		"the Domain goes without releasing domain "+fqdn+", which is not its namespace's")
	assert.Contains(t, eventNote(t, ns, "TCPEndpoint", "taken", tunav1.ReasonReleaseSkipped),
		"the TCPEndpoint goes without releasing TCP endpoint "+alias)
}

// The operator's key, bound to its cluster id as on a shared edge, cannot
// pose as another cluster, nor release, change or revoke what another
// cluster holds; and a tunnels:write key that is not bound still releases
// an owned reservation only for the owner it names.
func TestOperatorKeyCannotTouchAnotherCluster(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	admin := env.Edge.Client(env.Edge.AdminKey)
	operator := env.Edge.Client(env.Edge.OperatorKey)
	sub, alias := subdomainFor(ns, "theirs"), "theirs-"+tag(ns)
	fqdn := sub + "." + harness.BaseDomain
	theirs := apiwire.Sharing{Owner: otherCluster + "/" + ns}
	_, err := admin.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: sub, Sharing: theirs})
	require.NoError(t, err)
	_, err = admin.CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: alias, Sharing: theirs})
	require.NoError(t, err)
	theirKey, err := admin.CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "http", Address: sub, Owner: theirs.Owner})
	require.NoError(t, err)

	refused := func(err error, code, mentions string) {
		t.Helper()
		var ae *apiwire.APIError
		require.ErrorAs(t, err, &ae)
		assert.Equal(t, 403, ae.Status, "%v", err)
		assert.Equal(t, code, ae.Code, "%v", err)
		assert.Contains(t, ae.Message, mentions)
	}
	refused(operator.DeleteDomain(ctx, fqdn, ""), apiwire.CodeAddressOwned, "belongs to owner "+theirs.Owner)
	refused(operator.DeleteDomain(ctx, fqdn, theirs.Owner), apiwire.CodeForbidden, `bound to owner prefix "`+harness.TestClusterID+`"`)
	refused(operator.DeleteTCPEndpoint(ctx, alias, ""), apiwire.CodeAddressOwned, "belongs to owner "+theirs.Owner)
	_, err = operator.ShareDomain(ctx, fqdn, "", []string{harness.TestClusterID + "/" + ns})
	refused(err, apiwire.CodeAddressOwned, "belongs to owner "+theirs.Owner)
	_, err = operator.CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "http", Address: "x-" + sub, Owner: theirs.Owner})
	refused(err, apiwire.CodeForbidden, `bound to owner prefix "`+harness.TestClusterID+`"`)
	_, err = operator.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "y-" + sub})
	refused(err, apiwire.CodeForbidden, "name an owner under it")
	assert.True(t, apiwire.IsNotFound(operator.RevokeTunnelKey(ctx, theirKey.ID)), "another cluster's key does not exist for the bound key")

	// Any other tunnels:write key: not without naming the owner.
	unbound, err := admin.CreateAPIKey(ctx, apiwire.CreateAPIKey{Name: "unbound", Scopes: []string{apiwire.ScopeWrite}})
	require.NoError(t, err)
	refused(env.Edge.Client(unbound.Key).DeleteDomain(ctx, fqdn, ""), apiwire.CodeAddressOwned, "belongs to owner "+theirs.Owner)
	refused(env.Edge.Client(unbound.Key).DeleteTCPEndpoint(ctx, alias, harness.TestClusterID+"/"+ns), apiwire.CodeAddressOwned,
		"belongs to owner "+theirs.Owner)

	_, err = admin.GetDomain(ctx, fqdn)
	assert.NoError(t, err, "the other cluster's domain is still reserved")
	_, err = admin.GetTCPEndpoint(ctx, alias)
	assert.NoError(t, err, "the other cluster's endpoint is still reserved")
	_, err = admin.GetTunnelKey(ctx, theirKey.ID)
	assert.NoError(t, err, "the other cluster's key is not revoked")
	// The edge's administrator may still release it.
	require.NoError(t, admin.DeleteDomain(ctx, fqdn, ""))
	require.NoError(t, admin.DeleteTCPEndpoint(ctx, alias, ""))
}
