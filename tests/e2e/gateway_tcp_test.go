package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gatewayclass"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// A TCPRoute on a Gateway's TCP listener (the port of a reserved
// TCPEndpoint) carries a real TCP session both ways.
func TestGatewayTCPRoute(t *testing.T) {
	ctx := context.Background()
	ensureGatewayClass(t)
	ns := namespace(t)
	require.NoError(t, env.CP.Client.Create(ctx, &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: tunav1.TCPEndpointSpec{Alias: "db-" + tag(ns)}}))
	ep := waitEndpoint(t, ns, "db", tunav1.ReasonReserved)
	svc, err := harness.CreateService(ctx, env.CP.Client, ns, "db", harness.ServicePort{Port: 5432})
	require.NoError(t, err)
	serveGreeter(t, svc.Spec.ClusterIP, 5432, nil)

	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"}, Spec: gwv1.GatewaySpec{GatewayClassName: gatewayclass.ClassName,
		Listeners: []gwv1.Listener{{Name: "db", Protocol: gwv1.TCPProtocolType, Port: gwv1.PortNumber(ep.Status.Port)}}}}
	require.NoError(t, env.CP.Client.Create(ctx, gw))
	rt := &gwv1.TCPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Spec: gwv1.TCPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw", SectionName: ptr(gwv1.SectionName("db"))}}},
		Rules: []gwv1.TCPRouteRule{{BackendRefs: []gwv1.BackendRef{{BackendObjectReference: gwv1.BackendObjectReference{
			Name: "db", Port: ptr(gwv1.PortNumber(5432))}}}}},
	}}
	require.NoError(t, env.CP.Client.Create(ctx, rt))

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var got gwv1.TCPRoute
		require.NoError(c, env.CP.Client.Get(ctx, key(ns, "db"), &got))
		require.Len(c, got.Status.Parents, 1)
		p := got.Status.Parents[0]
		require.Equal(c, gatewayclass.ControllerName, p.ControllerName)
		for typ, reason := range map[string]string{"Accepted": "Accepted", "ResolvedRefs": "ResolvedRefs"} {
			cond := meta.FindStatusCondition(p.Conditions, typ)
			require.NotNil(c, cond, typ)
			require.Equal(c, []any{metav1.ConditionTrue, reason}, []any{cond.Status, cond.Reason}, "%s: %s", typ, cond.Message)
		}
	}, wait, 50*time.Millisecond, "TCPRoute never accepted")
	g := waitGateway(t, key(ns, "gw"), "Programmed", metav1.ConditionTrue, "Programmed")
	require.Len(t, g.Status.Addresses, 1)
	assert.Equal(t, "127.0.0.1", g.Status.Addresses[0].Value)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.CP.Client.Get(ctx, key(ns, "gw"), g))
		require.Len(c, g.Status.Listeners, 1)
		require.Equal(c, int32(1), g.Status.Listeners[0].AttachedRoutes)
	}, wait, 50*time.Millisecond)
	tun := waitReady(t, key(ns, "gateway-gw-db"), metav1.ConditionTrue, tunav1.ReasonConnected)
	assert.Equal(t, "tcp://"+ep.Status.Address, tun.Status.URL)

	conn, err := net.DialTimeout("tcp", ep.Status.Address, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	r := bufio.NewReader(conn)
	greeting, err := r.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "HELLO from "+net.JoinHostPort(svc.Spec.ClusterIP, "5432")+"\n", greeting)
	for i := range 3 {
		msg := fmt.Sprintf("line %d %s\n", i, strings.Repeat("y", 500*i))
		_, err = conn.Write([]byte(msg))
		require.NoError(t, err)
		got, err := r.ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, "ECHO "+msg, got)
	}
	conn.Close()

	// Deleting the route deletes its Tunnel; the port stays reserved.
	require.NoError(t, env.CP.Client.Delete(ctx, rt))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var tl tunav1.TunnelList
		require.NoError(c, env.CP.Client.List(ctx, &tl))
		for _, x := range tl.Items {
			require.False(c, x.Namespace == ns && x.Name == "gateway-gw-db", "the Tunnel of a listener without a route is kept")
		}
	}, wait, 50*time.Millisecond)
	t.Cleanup(func() { deleteAndWait(t, &tunav1.TCPEndpoint{}, key(ns, "db")) })
}
