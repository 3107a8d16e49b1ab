package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// With a short key TTL on the edge, the controller renews a tunnel's key
// before it expires: the same key and the same session outlive several
// lifetimes of the key.
func TestTunnelKeyRenewedBeforeExpiry(t *testing.T) {
	const ttl = 10 * time.Second
	ctx := context.Background()
	short := env.Edge.Options
	short.TunnelKeyTTL = ttl
	restartEdge(t, short)

	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "web", ns, "http://web:8080")))
	tun := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	api := env.Edge.Client(env.Edge.OperatorKey)
	first, err := api.GetTunnelKey(ctx, tun.Status.KeyID)
	require.NoError(t, err)
	require.NotNil(t, first.ExpiresAt, "the edge gives keys an expiry")
	require.EqualValues(t, ttl/time.Second, first.TTLSeconds)

	// Wait, by the clock, until two lifetimes of the first expiry have
	// passed; all along the key must stay live and serving.
	until := first.ExpiresAt.Add(ttl)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		k, err := api.GetTunnelKey(ctx, tun.Status.KeyID)
		if !assert.NoError(c, err, "the key was replaced or revoked instead of renewed") {
			return
		}
		now := time.Now()
		assert.True(c, k.ExpiresAt.After(now), "key expires at %v, now %v: it was not renewed in time", k.ExpiresAt, now)
		if assert.NotNil(c, k.Session, "the key's session ended") {
			assert.Equal(c, tun.Status.SessionID, k.Session.ID, "the session was replaced")
		}
		assert.True(c, now.After(until), "still waiting for %v", until)
	}, 3*ttl+30*time.Second, 250*time.Millisecond)

	code, body := get(t, tun.Status.URL)
	require.Equal(t, http.StatusOK, code, "%s", body)
	now := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	assert.Equal(t, tun.Status.KeyID, now.Status.KeyID, "the key was renewed, not replaced")
	assert.Equal(t, tun.Status.SessionID, now.Status.SessionID, "the session survived")
}
