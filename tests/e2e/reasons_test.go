package e2e

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// The reasons a Tunnel shows on its way to a key: KeyPending while no
// controller has looked at it (the agent's own view), KeyIssueFailed with
// the edge's answer when the edge refuses the key (on KeyIssued and on
// Ready), and Connected after a spec change once the edge accepts again.
func TestKeyPendingThenKeyIssueFailed(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	stopController(t)
	tun := httpTunnel(ns, "web", "pending-"+tag(ns), "http://web:8080")
	require.NoError(t, env.CP.Client.Create(ctx, tun))
	waitReady(t, key(ns, "web"), metav1.ConditionFalse, tunav1.ReasonKeyPending)

	p := newFaultProxy(t)
	p.fail(faultRule{match: request(http.MethodPost, "/v1/tunnel-keys"), status: http.StatusBadRequest, code: apiwire.CodeInvalidRequest})
	restartController(t, func(o *app.ControllerOptions) {
		o.EdgeAPIURL, o.EdgeAPIFingerprint = p.URL, apiwire.Fingerprint(p.Certificate().Raw)
	})
	got := waitReady(t, key(ns, "web"), metav1.ConditionFalse, tunav1.ReasonKeyIssueFailed)
	issued := status.Find(got.Status.Conditions, tunav1.ConditionKeyIssued)
	require.NotNil(t, issued)
	assert.Equal(t, []any{metav1.ConditionFalse, tunav1.ReasonKeyIssueFailed}, []any{issued.Status, issued.Reason})
	assert.Contains(t, issued.Message, apiwire.CodeInvalidRequest, "the message has the edge's answer")
	assert.Empty(t, got.Status.KeyID)
	assert.NotZero(t, p.failed.Load())

	p.heal()
	update(t, got, func(tun *tunav1.Tunnel) { tun.Spec.Subdomain = "issued-" + tag(ns) })
	up := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	assert.Equal(t, "web-8080", getEcho(t, up.Status.URL+"/").Backend)
	deleteAndWait(t, &tunav1.Tunnel{}, key(ns, "web"))
}

// A tcp Tunnel whose portOrAlias names no reserved TCPEndpoint gets its key
// but the edge refuses the bind: Ready=False EndpointNotReady. Reserving
// the endpoint brings it up without touching the Tunnel.
func TestTCPTunnelWaitsForItsEndpoint(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	svc, err := harness.CreateService(ctx, env.CP.Client, ns, "pg", harness.ServicePort{Port: 5432})
	require.NoError(t, err)
	serveGreeter(t, svc.Spec.ClusterIP, 5432, nil)
	alias := "late-" + tag(ns)
	tun := &tunav1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pg"},
		Spec: tunav1.TunnelSpec{Protocol: tunav1.ProtocolTCP, PortOrAlias: alias, Upstream: tunav1.TunnelUpstream{URL: "tcp://pg:5432"}}}
	require.NoError(t, env.CP.Client.Create(ctx, tun))
	t.Cleanup(func() {
		deleteAndWait(t, &tunav1.Tunnel{}, key(ns, "pg"))
		deleteAndWait(t, &tunav1.TCPEndpoint{}, key(ns, "pg"))
	})
	var cond metav1.Condition
	got := waitReady(t, key(ns, "pg"), metav1.ConditionFalse, tunav1.ReasonEndpointNotReady)
	cond = *status.Find(got.Status.Conditions, tunav1.ConditionReady)
	assert.Contains(t, cond.Message, alias, "the message names the missing endpoint")

	require.NoError(t, env.CP.Client.Create(ctx, &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pg"},
		Spec: tunav1.TCPEndpointSpec{Alias: alias}}))
	ep := waitEndpoint(t, ns, "pg", tunav1.ReasonReserved)
	up := waitReady(t, key(ns, "pg"), metav1.ConditionTrue, tunav1.ReasonConnected)
	assert.Equal(t, "tcp://"+ep.Status.Address, up.Status.URL)
	assert.Equal(t, "HELLO from "+svc.Spec.ClusterIP+":5432\n", greet(t, ep.Status.Address))
}

// A Domain the edge refuses (a name nested under the edge's base domain)
// shows Ready=False ReservationFailed with the edge's answer.
func TestDomainReservationFailed(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	d := &tunav1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nested"},
		Spec: tunav1.DomainSpec{Domain: "a." + tag(ns) + "." + harness.BaseDomain}}
	require.NoError(t, env.CP.Client.Create(ctx, d))
	t.Cleanup(func() { deleteAndWait(t, &tunav1.Domain{}, key(ns, "nested")) })
	got := waitDomain(t, ns, "nested", metav1.ConditionFalse, tunav1.ReasonReservationFailed)
	cond := status.Find(got.Status.Conditions, tunav1.ConditionReady)
	assert.Contains(t, cond.Message, "base domain")
	assert.Contains(t, cond.Message, apiwire.CodeInvalidDomain)
	assert.Empty(t, got.Status.FQDN)
}

// An operator installed without SecretSync answers each SecretSync with
// Ready=False SyncDisabled (and writes no Secret) instead of leaving it
// without status.
func TestSecretSyncDisabled(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	putSecret(t, ns+"/off", "k", "v")
	restartController(t, func(o *app.ControllerOptions) { o.SecretSync.Disabled = true })
	require.NoError(t, env.CP.Client.Create(ctx, secretSync(ns, "off", tunav1.SecretSyncSpec{
		Source: tunav1.SecretSyncSource{Name: ns + "/off"}, Target: tunav1.SecretSyncTarget{Name: "off"}})))
	_, cond := waitSync(t, ns, "off", metav1.ConditionFalse, tunav1.ReasonSyncDisabled)
	assert.Contains(t, cond.Message, "secretSync.enabled=false")
	assert.Nil(t, secretData(t, ns, "off"), "nothing is synced")
	deleteAndWait(t, &tunav1.SecretSync{}, key(ns, "off"))
}

// greet dials a public TCP address and returns the backend's first line.
func greet(t *testing.T, addr string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	line, err := bufio.NewReader(conn).ReadString('\n')
	require.NoError(t, err)
	return line
}
