package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// A request to the public address reaches the Service's backend with the
// public Host header and the X-Forwarded headers set by the edge.
func TestTunnelServesHTTP(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Name: "http", Port: 8080})
	applyExample(t, ns, "tunnel-http.yaml", nil) // the seed's Tunnel "web": subdomain my-app, http://web:8080
	t.Cleanup(func() { deleteAndWait(t, &tunav1.Tunnel{}, key(ns, "web")) })

	tun := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	host := "my-app." + harness.BaseDomain
	require.True(t, strings.HasPrefix(tun.Status.URL, "http://"+host), "status.url %q should be on host %s", tun.Status.URL, host)
	// The pool of the single test agent: one live session, its entry, and
	// no Degraded for a pool of the one replica that runs.
	assert.Equal(t, int32(1), tun.Status.Sessions, "status.sessions counts the live session")
	if assert.Len(t, tun.Status.Agents, 1) {
		assert.True(t, tun.Status.Agents[0].Connected)
		assert.Equal(t, tun.Status.SessionID, tun.Status.Agents[0].SessionID)
	}
	degraded := meta.FindStatusCondition(tun.Status.Conditions, tunav1.ConditionDegraded)
	if assert.NotNil(t, degraded, "the Degraded condition is written with Ready") {
		assert.Equal(t, metav1.ConditionFalse, degraded.Status)
		assert.Equal(t, tunav1.ReasonPoolComplete, degraded.Reason)
	}

	// A client-supplied X-Forwarded-For must not reach the backend as is.
	e := getEcho(t, tun.Status.URL+"/hello?x=1", "X-Forwarded-For", "203.0.113.9")
	assert.Equal(t, "web-8080", e.Backend)
	assert.Equal(t, "/hello", e.Path)
	assert.Equal(t, tun.Status.URL[len("http://"):], e.Host, "the backend sees the public Host")
	assert.Equal(t, []string{e.Host}, e.Header["X-Forwarded-Host"])
	assert.Equal(t, []string{"http"}, e.Header["X-Forwarded-Proto"])
	assert.Equal(t, []string{clientAddr(t).String()}, e.Header["X-Forwarded-For"], "the edge sets the client's address and drops the spoofed one")

	// The upstream by port name resolves through the Service.
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "named", ns+"-named", "http://web:http")))
	named := waitReady(t, key(ns, "named"), metav1.ConditionTrue, tunav1.ReasonConnected)
	assert.Equal(t, "web-8080", getEcho(t, named.Status.URL).Backend)
}

// Changing the upstream port takes effect without a new session.
func TestUpstreamPortChangeTakesEffect(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Name: "a", Port: 8080}, harness.ServicePort{Name: "b", Port: 9090})
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "web", ns, "http://web:8080")))
	tun := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	require.Equal(t, "web-8080", getEcho(t, tun.Status.URL).Backend)

	before := tun.Status
	update(t, tun, func(tun *tunav1.Tunnel) { tun.Spec.Upstream.URL = "http://web:9090" })
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := get(t, tun.Status.URL)
		assert.Equal(c, http.StatusOK, code)
		assert.Contains(c, string(body), `"backend":"web-9090"`)
	}, wait, 50*time.Millisecond)

	after := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	assert.Equal(t, before.SessionID, after.Status.SessionID, "an upstream change must not reconnect the tunnel")
	assert.Equal(t, before.KeyID, after.Status.KeyID, "an upstream change keeps the tunnel's key")
}

// Deleting the Tunnel revokes its key on the edge and the address stops
// answering.
func TestDeleteTunnelStopsTrafficAndRevokesKey(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "web", ns, "http://web:8080")))
	tun := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	require.Equal(t, "web-8080", getEcho(t, tun.Status.URL).Backend)

	api := env.Edge.Client(env.Edge.AdminKey)
	keys, err := api.ListTunnelKeys(ctx, map[string]string{edgeapi.LabelUID: string(tun.UID)})
	require.NoError(t, err)
	require.Len(t, keys, 1, "one key per tunnel")
	require.Equal(t, tun.Status.KeyID, keys[0].ID)

	require.NoError(t, env.CP.Client.Delete(ctx, tun))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := env.CP.Client.Get(ctx, key(ns, "web"), &tunav1.Tunnel{})
		assert.Error(c, err, "the Tunnel is gone once its finalizer ran")
	}, wait, 50*time.Millisecond)

	_, err = api.GetTunnelKey(ctx, keys[0].ID)
	require.True(t, apiwire.IsNotFound(err), "the key is revoked on the edge, got %v", err)
	code, body := get(t, tun.Status.URL)
	require.Equal(t, http.StatusNotFound, code, "the address no longer answers: %s", body)
}

// A Tunnel whose upstream is a Service of another namespace is refused: no
// key is issued, and Ready says why.
func TestUpstreamInOtherNamespaceRefused(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	other := namespace(t)
	echoService(t, other, "db", harness.ServicePort{Port: 8080})
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "sneaky", ns, "http://db."+other+":8080")))

	tun := waitReady(t, key(ns, "sneaky"), metav1.ConditionFalse, tunav1.ReasonUpstreamRefused)
	msg := tun.Status.Conditions[0].Message
	for _, c := range tun.Status.Conditions {
		if c.Type == tunav1.ConditionReady {
			msg = c.Message
		}
	}
	assert.Contains(t, msg, "namespace "+other)
	assert.Contains(t, msg, "allowExternalUpstreams")
	assert.Empty(t, tun.Status.URL)

	keys, err := env.Edge.Client(env.Edge.AdminKey).ListTunnelKeys(ctx, map[string]string{edgeapi.LabelUID: string(tun.UID)})
	require.NoError(t, err)
	assert.Empty(t, keys, "no key is issued for a refused upstream")
	code, _ := get(t, "http://"+ns+"."+harness.BaseDomain+"/")
	assert.Equal(t, http.StatusNotFound, code)
}
