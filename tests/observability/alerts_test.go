package observability

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// firing waits until the alert name fires with labels that include want,
// and returns it.
func firing(t *testing.T, name string, want map[string]string) alert {
	t.Helper()
	var got alert
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		alerts, err := env.prom.alerts()
		require.NoError(c, err)
		var seen []string
		for _, a := range alerts {
			if a.Labels["alertname"] != name {
				continue
			}
			seen = append(seen, a.State+labelsString(a.Labels))
			if a.State == "firing" && hasLabels(a.Labels, want) {
				got = a
				return
			}
		}
		c.Errorf("%s%s is not firing; %s alerts: %v", name, labelsString(want), name, seen)
	}, 2*wait, 250*time.Millisecond)
	return got
}

// active reports whether the alert name is pending or firing with want.
func active(t *testing.T, name string, want map[string]string) bool {
	t.Helper()
	alerts, err := env.prom.alerts()
	require.NoError(t, err)
	return slices.ContainsFunc(alerts, func(a alert) bool { return a.Labels["alertname"] == name && hasLabels(a.Labels, want) })
}

// resolved waits until the alert name is neither pending nor firing with want.
func resolved(t *testing.T, name string, want map[string]string) {
	t.Helper()
	require.Eventually(t, func() bool { return !active(t, name, want) }, 2*wait, 250*time.Millisecond,
		"%s%s stays active", name, labelsString(want))
}

func hasLabels(l, want map[string]string) bool {
	for k, v := range want {
		if l[k] != v {
			return false
		}
	}
	return true
}

// A tcp Tunnel whose alias no TCPEndpoint reserved gets its key, but the
// edge refuses its bind: the agent keeps retrying without a session, and
// TunaTunnelDown fires for that Tunnel, named in its summary. Reserving the
// endpoint brings the Tunnel up and the alert resolves.
func TestAlertTunnelDown(t *testing.T) {
	ns := namespace(t, "down")
	tok := strings.SplitN(ns, "-", 3)[1]
	greeterService(t, ns, "pg", 5432)
	want := map[string]string{"exported_namespace": ns, "name": "pg", "severity": "warning"}
	require.False(t, active(t, "TunaTunnelDown", want))
	tun := tcpTunnel(ns, "pg", "obs-late-"+tok, "tcp://pg:5432")
	create(t, tun)
	t.Cleanup(func() { deleteAndWait(t, tun) })
	waitReady(t, key(ns, "pg"), metav1.ConditionFalse, tunav1.ReasonEndpointNotReady)

	a := firing(t, "TunaTunnelDown", want)
	assert.Equal(t, "Tunnel "+ns+"/pg has no edge session", a.Annotations["summary"])
	assert.Contains(t, a.Annotations["runbook_url"], "operations.md#tunatunneldown")

	ep := &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pg"}, Spec: tunav1.TCPEndpointSpec{Alias: "obs-late-" + tok}}
	create(t, ep)
	t.Cleanup(func() { deleteAndWait(t, ep) })
	waitReady(t, key(ns, "pg"), metav1.ConditionTrue, tunav1.ReasonConnected)
	resolved(t, "TunaTunnelDown", want)
}

// A Tunnel asking for a subdomain another namespace reserved gets no key
// (KeyIssued=False, AddressOwned): TunaTunnelKeysNotIssued fires, and
// resolves once that Tunnel is gone.
func TestAlertTunnelKeysNotIssued(t *testing.T) {
	owner, other := namespace(t, "owner"), namespace(t, "other")
	sub := "obs-owned-" + strings.SplitN(owner, "-", 3)[1]
	d := &tunav1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: owner, Name: "shop"}, Spec: tunav1.DomainSpec{Subdomain: sub}}
	create(t, d)
	t.Cleanup(func() { deleteAndWait(t, d) })
	waitObjectReady(t, d, func() []metav1.Condition { return d.Status.Conditions })
	// No other test leaves a refused key behind.
	resolved(t, "TunaTunnelKeysNotIssued", nil)

	echoService(t, other, "shop", 8080)
	tun := httpTunnel(other, "shop", sub, "http://shop:8080")
	create(t, tun)
	t.Cleanup(func() { deleteAndWait(t, tun) })
	waitReady(t, key(other, "shop"), metav1.ConditionFalse, tunav1.ReasonAddressOwned)
	a := firing(t, "TunaTunnelKeysNotIssued", map[string]string{"severity": "warning"})
	assert.Equal(t, "1 Tunnels have no key: the edge refused it", a.Annotations["summary"])

	deleteAndWait(t, tun)
	resolved(t, "TunaTunnelKeysNotIssued", nil)
}

// More SSH connections than the edge lets log in at once: the edge refuses
// the one over its handshake limit, and TunaEdgeLimitRefusals fires for
// that limit on that instance.
func TestAlertEdgeLimitRefusals(t *testing.T) {
	instance := strings.TrimPrefix(env.Edge.APIURL(), "https://")
	refusals := `tuna_edge_limit_refusals_total{limit="handshakes"}`
	before, err := env.prom.value(refusals)
	require.NoError(t, err)
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	// Connections that never start the SSH handshake each hold a slot
	// until the edge's handshake timeout; the default limit is 64.
	for range 64 + 1 {
		c, err := net.DialTimeout("tcp", env.Edge.SSHAddr(), 5*time.Second)
		require.NoError(t, err)
		conns = append(conns, c)
	}
	refused := func() bool {
		// The refused connection gets one line, then EOF.
		c := conns[len(conns)-1]
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b := make([]byte, 512)
		n, _ := c.Read(b)
		return strings.Contains(string(b[:n]), "too many SSH logins")
	}
	require.True(t, refused(), "the edge refused the connection over its handshake limit")
	// Prometheus sees this refusal, whatever an earlier run left firing.
	env.prom.waitAbove(t, refusals, before)
	for _, c := range conns {
		c.Close()
	}
	conns = nil

	a := firing(t, "TunaEdgeLimitRefusals", map[string]string{"instance": instance, "limit": "handshakes"})
	assert.Equal(t, "The edge "+instance+" refuses work at its handshakes limit", a.Annotations["summary"])
}

// The edge goes away. The controller's API calls fail (TunaEdgeAPIFailing),
// the key of a Tunnel created meanwhile cannot be issued, so its
// reconciles fail and retry (TunaReconcileErrors for tunnel-key), and
// running tunnels lose their sessions (TunaTunnelDown). With the edge back
// the tunnel reconnects and its alert resolves.
func TestAlertsOnEdgeOutage(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "outage")
	tok := strings.SplitN(ns, "-", 3)[1]
	echoService(t, ns, "web", 8080)
	running := httpTunnel(ns, "web", "obs-outage-"+tok, "http://web:8080")
	create(t, running)
	t.Cleanup(func() { deleteAndWait(t, running) })
	waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	down := map[string]string{"exported_namespace": ns, "name": "web"}
	require.False(t, active(t, "TunaTunnelDown", down))

	failedCalls := `tuna_edge_api_calls_total{result="error"}`
	before, err := env.prom.value(failedCalls)
	require.NoError(t, err)
	opts := env.Edge.Options
	require.NoError(t, env.Edge.Close())
	restarted := false
	restart := func() {
		if restarted {
			return
		}
		restarted = true
		edge, err := harness.StartEdge(ctx, env.EdgeDir, opts)
		require.NoError(t, err)
		env.Edge = edge
	}
	late := httpTunnel(ns, "late", "obs-late-"+tok, "http://web:8080")
	create(t, late)
	t.Cleanup(func() { deleteAndWait(t, late) })
	// Cleanups run last first: the edge is back before the Tunnels'
	// finalizers need it.
	t.Cleanup(restart)

	// Calls without an answer, as Prometheus sees them: the alert below is
	// this outage's, whatever an earlier run left firing.
	env.prom.waitAbove(t, failedCalls, before)
	a := firing(t, "TunaEdgeAPIFailing", map[string]string{"severity": "critical"})
	assert.Contains(t, a.Annotations["description"], "of the controller's calls to the edge control API failed")
	firing(t, "TunaReconcileErrors", map[string]string{"controller": "tunnel-key"})
	firing(t, "TunaTunnelDown", down)

	restart()
	waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	waitReady(t, key(ns, "late"), metav1.ConditionTrue, tunav1.ReasonConnected)
	resolved(t, "TunaTunnelDown", down)
}
