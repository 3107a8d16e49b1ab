package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// A control-plane outage is not a data-plane outage. The edge API fails
// (503 on every call) for several key-check periods, and the controller is
// restarted in the middle of it with nothing cached; then only GET
// /v1/edge fails, then the key list is refused (401). All the while requests through a live Tunnel and a live
// Ingress host keep succeeding, no key is revoked or re-issued, and
// KeyIssued says Unknown/EdgeUnreachable; it goes back to True when the
// API recovers.
func TestEdgeAPIOutageKeepsTunnelServing(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	ensureTunaClass(t)
	fault := newFaultProxy(t)
	controllerBehind(t, fault)
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "web", ns, "http://web:8080")))
	host := reserve(t, ns, "shop")
	require.NoError(t, env.CP.Client.Create(ctx, tunaIngress(ns, "shop", rule(host, ingPath{prefix, "/", "web", 8080}))))
	tun := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	keyID := tun.Status.KeyID
	require.NotEmpty(t, keyID)
	waitBackend(t, hostURL(host), "web-8080")
	hostKey := liveKey(t, host)

	// Requests run without pause on both, over kept and new connections,
	// until the API is back (the budget only bounds a runaway test).
	tunnelHost := strings.TrimPrefix(tun.Status.URL, "http://")
	loads := []*load{startLoad(tunnelHost, []string{"/"}, 2, 200000), startLoad(host, []string{"/"}, 2, 200000)}
	t.Cleanup(func() {
		for _, l := range loads {
			l.finish()
		}
	})
	checks := func() int { return fault.seen("GET /v1/tunnel-keys") }

	// The whole API fails for longer than the key-check period
	// (reservationResync).
	fault.fail(faultRule{match: everything, status: http.StatusServiceUnavailable, code: "internal"})
	start := time.Now()
	waitKeyIssued(t, key(ns, "web"), metav1.ConditionUnknown, tunav1.ReasonEdgeUnreachable)
	require.Eventually(t, func() bool { return fault.failed.Load() >= 3 && time.Since(start) > 3*reservationResync },
		wait, 50*time.Millisecond, "the key checks never ran into the outage")

	// A restart in the outage: the new controller knows nothing of the edge.
	controllerBehind(t, fault)
	before := checks()
	require.Eventually(t, func() bool { return checks() >= before+2 }, wait, 50*time.Millisecond,
		"the restarted controller never checked the key")

	// Only the edge's facts fail: the key list says the key is there, and
	// "cannot read the base domain" must not read as "the address changed".
	fault.fail(faultRule{match: request(http.MethodGet, "/v1/edge"), status: http.StatusServiceUnavailable, code: "internal"})
	before = checks()
	require.Eventually(t, func() bool { return checks() >= before+3 }, wait, 50*time.Millisecond,
		"the key checks stopped while GET /v1/edge failed")
	assert.Equal(t, metav1.ConditionUnknown, keyIssued(t, key(ns, "web")).Status)

	// A refused check (the operator's own key is rejected) says so, and
	// still keeps the key the tunnel serves with.
	fault.fail(faultRule{match: request(http.MethodGet, "/v1/tunnel-keys"), status: http.StatusUnauthorized, code: apiwire.CodeUnauthorized})
	refused := waitKeyIssued(t, key(ns, "web"), metav1.ConditionUnknown, tunav1.ReasonAPIKeyInvalid)
	assert.Contains(t, status.Find(refused.Status.Conditions, tunav1.ConditionKeyIssued).Message, "keeps serving with its key "+keyID)

	fault.heal()
	healed := waitKeyIssued(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonKeyIssued)
	for _, l := range loads {
		sent := l.ok.Load()
		require.Eventually(t, func() bool { return l.ok.Load() > sent }, wait, 10*time.Millisecond, "the load ran out before the API was back")
		l.finish()
		assert.Zero(t, l.failed.Load(), "requests through a live tunnel failed during the API outage: %v", l.failures)
		assert.Greater(t, l.ok.Load(), int64(100), "too few requests to tell")
		t.Logf("%d requests succeeded, %d failed", l.ok.Load(), l.failed.Load())
	}
	assert.Equal(t, keyID, healed.Status.KeyID, "the key was replaced")
	// No key was issued for them: the edge holds the one key of each. (The
	// count of issue calls would not tell: the shared controller serves an
	// earlier test's Tunnels too, whose keys may come due meanwhile.)
	if host := hostKeys(t, host); assert.Len(t, host, 1) {
		assert.Equal(t, hostKey.ID, host[0].ID, "a key was issued for the Ingress host during the outage")
	}
	// The shared controller serves the whole cluster: an earlier test's
	// namespace that is still going may have its keys revoked now, so
	// only this test's two keys are looked at.
	for _, id := range []string{keyID, hostKey.ID} {
		assert.Zero(t, fault.seenPath("DELETE /v1/tunnel-keys/"+id), "key %s was revoked during the outage", id)
	}
	keys, err := env.Edge.Client(env.Edge.AdminKey).ListTunnelKeys(ctx, map[string]string{edgeapi.LabelUID: string(tun.UID)})
	require.NoError(t, err)
	require.Len(t, keys, 1)
	assert.Equal(t, keyID, keys[0].ID, "the edge still has the key")
	assert.Equal(t, hostKey.ID, liveKey(t, host).ID, "the Ingress host kept its key")
	// The outage did not wipe what the Domain recorded: still the
	// operator's own reservation, not one adopted on recovery.
	d := waitDomain(t, ns, "shop", metav1.ConditionTrue, tunav1.ReasonReserved)
	assert.False(t, d.Status.Adopted)
	assert.Equal(t, host, d.Status.FQDN)
	now := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	assert.Equal(t, tun.Status.SessionID, now.Status.SessionID, "the tunnel's session was never restarted")
}

// A release the edge refuses keeps the finalizer, and Ready says how to
// unblock it: once the cause is gone the reservation is released, or the
// force-release annotation lets the resource go without releasing.
func TestRefusedReleaseKeepsFinalizer(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	api := env.Edge.Client(env.Edge.AdminKey)
	fault := newFaultProxy(t)
	controllerBehind(t, fault)
	for _, name := range []string{"held", "forced"} {
		require.NoError(t, env.CP.Client.Create(ctx, &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: tunav1.TCPEndpointSpec{Alias: name + "-" + tag(ns)}}))
		waitEndpoint(t, ns, name, tunav1.ReasonReserved)
	}

	fault.fail(faultRule{match: request(http.MethodDelete, "/v1/tcp-endpoints/"), status: http.StatusForbidden, code: apiwire.CodeForbidden})
	for _, name := range []string{"held", "forced"} {
		require.NoError(t, env.CP.Client.Delete(ctx, &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}))
	}
	for _, name := range []string{"held", "forced"} {
		var e tunav1.TCPEndpoint
		cond := waitCondition(t, &e, key(ns, name), func() []metav1.Condition { return e.Status.Conditions }, metav1.ConditionFalse, tunav1.ReasonReleaseBlocked)
		assert.Contains(t, cond.Message, "injected failure")
		assert.Contains(t, cond.Message, tunav1.AnnotationForceRelease+"=true", "the message says how to force it")
		assert.Contains(t, e.Finalizers, tunav1.FinalizerReservation)
		_, err := api.GetTCPEndpoint(ctx, e.Spec.Alias)
		require.NoError(t, err, "the reservation is still on the edge")
	}

	// Forced: gone, and the reservation stays on the edge for the user.
	var forced tunav1.TCPEndpoint
	require.NoError(t, env.CP.Client.Get(ctx, key(ns, "forced"), &forced))
	patch := client.MergeFrom(forced.DeepCopy())
	forced.Annotations = map[string]string{tunav1.AnnotationForceRelease: "true"}
	require.NoError(t, env.CP.Client.Patch(ctx, &forced, patch))
	waitGone(t, &tunav1.TCPEndpoint{}, key(ns, "forced"))
	_, err := api.GetTCPEndpoint(ctx, forced.Spec.Alias)
	require.NoError(t, err, "force-release lets the resource go without releasing")
	require.NoError(t, api.DeleteTCPEndpoint(ctx, forced.Spec.Alias, ""))
	waitObjectEvent(t, ns, "TCPEndpoint", "forced", tunav1.ReasonReleaseForced)

	// Unblocked: the retry releases it without any change to the object.
	fault.heal()
	waitGone(t, &tunav1.TCPEndpoint{}, key(ns, "held"))
	_, err = api.GetTCPEndpoint(ctx, "held-"+tag(ns))
	assert.True(t, apiwire.IsNotFound(err), "the release went through once the edge accepted it, got %v", err)
}

func keyIssued(t *testing.T, k types.NamespacedName) metav1.Condition {
	t.Helper()
	var tun tunav1.Tunnel
	require.NoError(t, env.CP.Client.Get(context.Background(), k, &tun))
	if c := status.Find(tun.Status.Conditions, tunav1.ConditionKeyIssued); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// waitKeyIssued waits for the Tunnel's KeyIssued condition.
func waitKeyIssued(t *testing.T, k types.NamespacedName, want metav1.ConditionStatus, reason string) *tunav1.Tunnel {
	t.Helper()
	var tun tunav1.Tunnel
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.CP.Client.Get(context.Background(), k, &tun))
		cond := status.Find(tun.Status.Conditions, tunav1.ConditionKeyIssued)
		require.NotNil(c, cond, "no KeyIssued condition yet")
		assert.Equal(c, []any{want, reason}, []any{cond.Status, cond.Reason}, "KeyIssued=%s %s: %s", cond.Status, cond.Reason, cond.Message)
	}, wait, 50*time.Millisecond, "%s never had KeyIssued=%s %s", k, want, reason)
	return &tun
}

// waitObjectEvent waits until the object has an event of reason.
func waitObjectEvent(t *testing.T, ns, kind, name, reason string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var list eventsv1.EventList
		require.NoError(c, env.CP.Client.List(context.Background(), &list, client.InNamespace(ns)))
		for _, e := range list.Items {
			if e.Regarding.Kind == kind && e.Regarding.Name == name && e.Reason == reason {
				return
			}
		}
		assert.Fail(c, "no "+reason+" event on "+kind+" "+ns+"/"+name)
	}, wait, 50*time.Millisecond)
}

// waitGone waits until the object no longer exists.
func waitGone(t *testing.T, obj client.Object, k types.NamespacedName) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := env.CP.Client.Get(context.Background(), k, obj)
		assert.True(c, apierrors.IsNotFound(err), "%s still exists: %v", k, err)
	}, wait, 50*time.Millisecond)
}
