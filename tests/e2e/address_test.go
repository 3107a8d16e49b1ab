package e2e

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// A tcp Tunnel may name its port by number instead of by alias: the port
// of a TCPEndpoint reserved in its namespace. The key is bound to that
// port and the traffic flows through it.
func TestTCPTunnelByPortNumber(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	svc, err := harness.CreateService(ctx, env.CP.Client, ns, "pg", harness.ServicePort{Port: 5432})
	require.NoError(t, err)
	serveGreeter(t, svc.Spec.ClusterIP, 5432, nil)
	require.NoError(t, env.CP.Client.Create(ctx, &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pg"},
		Spec: tunav1.TCPEndpointSpec{Alias: "num-" + tag(ns)}}))
	t.Cleanup(func() {
		deleteAndWait(t, &tunav1.Tunnel{}, key(ns, "pg"))
		deleteAndWait(t, &tunav1.TCPEndpoint{}, key(ns, "pg"))
	})
	ep := waitEndpoint(t, ns, "pg", tunav1.ReasonReserved)
	port := strconv.Itoa(int(ep.Status.Port))

	require.NoError(t, env.CP.Client.Create(ctx, &tunav1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pg"},
		Spec: tunav1.TunnelSpec{Protocol: tunav1.ProtocolTCP, PortOrAlias: port, Upstream: tunav1.TunnelUpstream{URL: "tcp://pg:5432"}}}))
	tun := waitReady(t, key(ns, "pg"), metav1.ConditionTrue, tunav1.ReasonConnected)
	assert.Equal(t, "tcp://"+ep.Status.Address, tun.Status.URL)
	k, err := env.Edge.Client(env.Edge.AdminKey).GetTunnelKey(ctx, tun.Status.KeyID)
	require.NoError(t, err)
	assert.Equal(t, []string{"tcp", port}, []string{k.Protocol, k.Address}, "the key is bound to the port number")
	assert.Equal(t, "HELLO from "+svc.Spec.ClusterIP+":5432\n", greet(t, ep.Status.Address))
}

// Changing a Tunnel's address re-keys it: the key bound to the old
// subdomain is revoked, a new one bound to the new subdomain is issued, the
// old address stops serving and the new one serves.
func TestSubdomainChangeReKeys(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	api := env.Edge.Client(env.Edge.AdminKey)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	oldSub, newSub := "before-"+tag(ns), "after-"+tag(ns)
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "web", oldSub, "http://web:8080")))
	t.Cleanup(func() { deleteAndWait(t, &tunav1.Tunnel{}, key(ns, "web")) })
	tun := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	oldURL, oldKey := tun.Status.URL, tun.Status.KeyID
	assert.Equal(t, "web-8080", getEcho(t, oldURL+"/").Backend)

	update(t, tun, func(tun *tunav1.Tunnel) { tun.Spec.Subdomain = newSub })
	// The agent may report Ready for the new generation on the old session
	// before the controller re-keys, so wait for the new address itself.
	newURL := strings.Replace(oldURL, oldSub, newSub, 1)
	var moved *tunav1.Tunnel
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		moved = waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
		assert.Equal(c, newURL, moved.Status.URL, "status.url follows the new address")
	}, wait, 50*time.Millisecond)
	require.NotEqual(t, oldKey, moved.Status.KeyID, "a new key is issued")

	_, err := api.GetTunnelKey(ctx, oldKey)
	assert.True(t, apiwire.IsNotFound(err), "the old key is revoked, got %v", err)
	k, err := api.GetTunnelKey(ctx, moved.Status.KeyID)
	require.NoError(t, err)
	assert.Equal(t, newSub+"."+harness.BaseDomain, k.Address, "the new key is bound to the new address")

	assert.Equal(t, "web-8080", getEcho(t, moved.Status.URL+"/").Backend)
	code, body := get(t, oldURL+"/")
	assert.Equal(t, http.StatusNotFound, code, "the old address serves no more: %s", body)
}
