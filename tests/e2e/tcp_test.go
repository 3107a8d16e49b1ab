package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// serveGreeter listens on ip:port like a server-first protocol (PostgreSQL,
// SMTP): it greets, then answers each line. When it reads a PROXY header
// first it reports it on proxied.
func serveGreeter(t *testing.T, ip string, port int32, proxied chan<- string) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(int(port))))
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				if proxied != nil {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					proxied <- strings.TrimSpace(line)
				}
				fmt.Fprintf(conn, "HELLO from %s\n", conn.LocalAddr())
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					fmt.Fprintf(conn, "ECHO %s", line)
				}
			}()
		}
	}()
}

func waitEndpoint(t *testing.T, ns, name, reason string) *tunav1.TCPEndpoint {
	t.Helper()
	var e tunav1.TCPEndpoint
	waitCondition(t, &e, key(ns, name), func() []metav1.Condition { return e.Status.Conditions }, metav1.ConditionTrue, reason)
	return &e
}

// publishTCPExample applies examples/tunnel-tcp.yaml in ns, with a
// greeter behind its Service postgres, and waits for its TCPEndpoint's
// reservation; it returns the Service and the TCPEndpoint.
func publishTCPExample(t *testing.T, ns string) (*corev1.Service, *tunav1.TCPEndpoint) {
	t.Helper()
	svc, err := harness.CreateService(context.Background(), env.CP.Client, ns, "postgres", harness.ServicePort{Port: 5432})
	require.NoError(t, err)
	serveGreeter(t, svc.Spec.ClusterIP, 5432, nil)
	applyExample(t, ns, "tunnel-tcp.yaml", nil) // TCPEndpoint postgres + Tunnel postgres
	t.Cleanup(func() {
		deleteAndWait(t, &tunav1.Tunnel{}, key(ns, "postgres"))
		deleteAndWait(t, &tunav1.TCPEndpoint{}, key(ns, "postgres"))
	})
	return svc, waitEndpoint(t, ns, "postgres", tunav1.ReasonReserved)
}

// Real TCP traffic through a TCPEndpoint and a tcp Tunnel, both ways, with
// the seed's manifests.
func TestTCPTunnelThroughEndpoint(t *testing.T) {
	ns := namespace(t)
	svc, ep := publishTCPExample(t, ns)
	require.NotZero(t, ep.Status.Port)
	require.Equal(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ep.Status.Port))), ep.Status.Address)
	tun := waitReady(t, key(ns, "postgres"), metav1.ConditionTrue, tunav1.ReasonConnected)
	assert.Equal(t, "tcp://"+ep.Status.Address, tun.Status.URL)

	conn, err := net.DialTimeout("tcp", ep.Status.Address, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	r := bufio.NewReader(conn)
	greeting, err := r.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "HELLO from "+net.JoinHostPort(svc.Spec.ClusterIP, "5432")+"\n", greeting, "server-to-client bytes arrive")
	for i := range 3 {
		msg := fmt.Sprintf("query %d %s\n", i, strings.Repeat("x", 1000*i))
		_, err = conn.Write([]byte(msg))
		require.NoError(t, err)
		got, err := r.ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, "ECHO "+msg, got, "client-to-server bytes arrive and come back")
	}
}

// PROXY protocol v1 prepends the public client's address for the backend.
func TestTCPTunnelProxyProtocol(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	svc, err := harness.CreateService(ctx, env.CP.Client, ns, "smtp", harness.ServicePort{Port: 2525})
	require.NoError(t, err)
	proxied := make(chan string, 1)
	serveGreeter(t, svc.Spec.ClusterIP, 2525, proxied)
	alias := "smtp-" + tag(ns)
	applyExample(t, ns, "tunnel-tcp.yaml", func(u *unstructured.Unstructured) {
		u.SetName("smtp")
		if u.GetKind() == "TCPEndpoint" {
			_ = unstructured.SetNestedField(u.Object, alias, "spec", "alias")
			return
		}
		_ = unstructured.SetNestedField(u.Object, alias, "spec", "portOrAlias")
		_ = unstructured.SetNestedField(u.Object, "tcp://smtp:2525", "spec", "upstream", "url")
		_ = unstructured.SetNestedField(u.Object, "v1", "spec", "proxyProtocol")
	})
	ep := waitEndpoint(t, ns, "smtp", tunav1.ReasonReserved)
	waitReady(t, key(ns, "smtp"), metav1.ConditionTrue, tunav1.ReasonConnected)

	conn, err := net.DialTimeout("tcp", ep.Status.Address, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	local := conn.LocalAddr().(*net.TCPAddr)
	select {
	case header := <-proxied:
		assert.Equal(t, fmt.Sprintf("PROXY TCP4 127.0.0.1 127.0.0.1 %d %d", local.Port, ep.Status.Port), header)
	case <-time.After(10 * time.Second):
		t.Fatal("the backend never received a PROXY header")
	}
}

// A TCPEndpoint whose alias already exists on the account is adopted and
// survives the resource's deletion even with reclaimPolicy Delete; one the
// operator reserved is released.
func TestTCPEndpointAdoptionAndReclaim(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	api := env.Edge.Client(env.Edge.AdminKey)
	byHand, err := api.CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: "byhand-" + tag(ns)})
	require.NoError(t, err)

	adopted := &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "adopted"},
		Spec: tunav1.TCPEndpointSpec{Alias: byHand.Alias}}
	ours := &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ours"},
		Spec: tunav1.TCPEndpointSpec{Alias: "ours-" + tag(ns)}}
	require.NoError(t, env.CP.Client.Create(ctx, adopted))
	require.NoError(t, env.CP.Client.Create(ctx, ours))
	a := waitEndpoint(t, ns, "adopted", tunav1.ReasonAdopted)
	assert.True(t, a.Status.Adopted)
	assert.Equal(t, int32(byHand.Port), a.Status.Port, "the existing port is kept")
	o := waitEndpoint(t, ns, "ours", tunav1.ReasonReserved)
	assert.False(t, o.Status.Adopted)

	// Deleted on the edge by hand: re-created with a port, same alias.
	require.NoError(t, api.DeleteTCPEndpoint(ctx, o.Spec.Alias, ""))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := api.GetTCPEndpoint(ctx, o.Spec.Alias)
		assert.NoError(c, err)
	}, wait, 100*time.Millisecond, "a reservation deleted on the edge is re-created")

	deleteAndWait(t, &tunav1.TCPEndpoint{}, key(ns, "adopted"))
	deleteAndWait(t, &tunav1.TCPEndpoint{}, key(ns, "ours"))
	_, err = api.GetTCPEndpoint(ctx, byHand.Alias)
	assert.NoError(t, err, "an adopted reservation is never deleted")
	_, err = api.GetTCPEndpoint(ctx, o.Spec.Alias)
	assert.True(t, apiwire.IsNotFound(err), "reclaimPolicy Delete releases the operator's reservation, got %v", err)
}
