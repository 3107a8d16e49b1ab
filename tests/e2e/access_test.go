package e2e

import (
	"context"
	"net/http"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// denyCIDRs on a Tunnel reach the edge, which refuses matching clients
// before any byte reaches the cluster; allowCIDRs admit the rest.
func TestTunnelCIDRRules(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	denied := httpTunnel(ns, "denied", ns+"-denied", "http://web:8080")
	denied.Spec.DenyCIDRs = []string{"127.0.0.0/8"}
	allowed := httpTunnel(ns, "allowed", ns+"-allowed", "http://web:8080")
	allowed.Spec.AllowCIDRs = []string{clientAddr(t).String() + "/32"}
	require.NoError(t, env.CP.Client.Create(ctx, denied))
	require.NoError(t, env.CP.Client.Create(ctx, allowed))

	d := waitReady(t, key(ns, "denied"), metav1.ConditionTrue, tunav1.ReasonConnected)
	code, body := get(t, d.Status.URL)
	assert.Equal(t, http.StatusForbidden, code, "a denied client is refused at the edge: %s", body)
	assert.NotContains(t, string(body), `"backend"`)
	a := waitReady(t, key(ns, "allowed"), metav1.ConditionTrue, tunav1.ReasonConnected)
	assert.Equal(t, "web-8080", getEcho(t, a.Status.URL).Backend)
	other, err := publicClientFrom(netip.MustParseAddr("127.0.0.1")).Get(a.Status.URL)
	require.NoError(t, err)
	_ = other.Body.Close()
	assert.Equal(t, http.StatusForbidden, other.StatusCode, "a client outside allowCIDRs is refused")
}

// Two Tunnels asking for the same subdomain: the first serves it, the
// second says AddressTaken, and takes over once the first is deleted.
func TestAddressTaken(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "first", ns, "http://web:8080")))
	first := waitReady(t, key(ns, "first"), metav1.ConditionTrue, tunav1.ReasonConnected)
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "second", ns, "http://web:8080")))
	second := waitReady(t, key(ns, "second"), metav1.ConditionFalse, tunav1.ReasonAddressTaken)
	assert.Contains(t, readyMessage(second.Status.Conditions), "another tunnel")

	deleteAndWait(t, &tunav1.Tunnel{}, key(ns, "first"))
	now := waitReady(t, key(ns, "second"), metav1.ConditionTrue, tunav1.ReasonConnected)
	assert.Equal(t, first.Status.URL, now.Status.URL)
}
