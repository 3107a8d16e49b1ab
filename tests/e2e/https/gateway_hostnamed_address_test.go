package https

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gatewayclass"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// A Gateway whose listeners all have hostnames gets an address of its own
// while the edge has one free, as an in-cluster Gateway gets its load
// balancer's: status.addresses lists it first, and a client that dials it
// with the Host of the listener's hostname reaches the listener's route,
// while a Host no listener takes gets the router's 404. Gateways that need
// an address (a listener without a hostname) come first: once none is
// free, the next one takes this Gateway's address, in another namespace,
// and serves its own routes there; this Gateway's status then lists its
// hostname only, which the edge still serves by name. When an address is
// free again, the Gateway gets one again.
func TestHostnamedGatewayAddressUntilOneNeedsIt(t *testing.T) {
	ctx := context.Background()
	ns := testNamespace(t, "gw-hostnamed")
	ensureGatewayClass(t)
	port := gwv1.PortNumber(edge.Options.GatewayHTTPPort)
	host := readyDomain(t, ns)
	echo(t, ns, "named")
	hostname := gwv1.Hostname(host)
	createGateway(t, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"}, Spec: gwv1.GatewaySpec{
		GatewayClassName: gatewayclass.ClassName,
		Listeners:        []gwv1.Listener{{Name: "web", Protocol: gwv1.HTTPProtocolType, Port: port, Hostname: &hostname}},
	}})
	require.NoError(t, cp.Client.Create(ctx, echoRoute(ns, "named", gwv1.ParentReference{Name: "gw"})))

	addr := gatewayAddress(t, ns)
	at := net.JoinHostPort(addr, strconv.Itoa(int(port)))
	awaitPlain(t, at, host, "named "+host)
	code, body, reason := fetchPlain(t, at, "unknown.example.test")
	assert.Equal(t, http.StatusNotFound, code, "a Host no listener takes: %s", body)
	assert.Equal(t, "no-route", reason)
	awaitPlain(t, edge.HTTPAddr(), host, "named "+host)

	// Gateways that need an address take the free ones, then this one's.
	var taker string
	for i := 0; taker == ""; i++ {
		require.Less(t, i, len(edge.Options.GatewayAddresses), "no Gateway that needs an address took %s", addr)
		needs := testNamespace(t, "gw-needs")
		echo(t, needs, needs)
		createGateway(t, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: needs, Name: "gw"}, Spec: gwv1.GatewaySpec{
			GatewayClassName: gatewayclass.ClassName,
			Listeners:        []gwv1.Listener{{Name: "any", Protocol: gwv1.HTTPProtocolType, Port: port}},
		}})
		require.NoError(t, cp.Client.Create(ctx, echoRoute(needs, needs, gwv1.ParentReference{Name: "gw"})))
		if gatewayAddress(t, needs) == addr {
			taker = needs
		}
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var gw gwv1.Gateway
		require.NoError(c, cp.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gw"}, &gw))
		require.Len(c, gw.Status.Addresses, 1)
		require.Equal(c, gwv1.HostnameAddressType, *gw.Status.Addresses[0].Type)
		require.Equal(c, host, gw.Status.Addresses[0].Value)
		cond := meta.FindStatusCondition(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed))
		require.NotNil(c, cond)
		require.Equal(c, metav1.ConditionTrue, cond.Status, cond.Message)
	}, wait, 50*time.Millisecond, "the hostnamed Gateway's status still lists the address it gave up")
	// The address now serves the taker's routes, whatever the Host (the
	// edge let its namespace claim the address), and the hostname is
	// still served by name.
	awaitPlain(t, at, host, taker+" "+host)
	awaitPlain(t, edge.HTTPAddr(), host, "named "+host)

	// Free again: the hostnamed Gateway gets an address again.
	require.NoError(t, cp.Client.Delete(ctx, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: taker, Name: "gw"}}))
	again := net.JoinHostPort(gatewayAddress(t, ns), strconv.Itoa(int(port)))
	awaitPlain(t, again, host, "named "+host)
}

// readyDomain reserves the subdomain ns for ns and returns its host once
// the Domain is Ready.
func readyDomain(t *testing.T, ns string) string {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, cp.Client.Create(ctx, &tunav1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "host"},
		Spec: tunav1.DomainSpec{Subdomain: ns}}))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var d tunav1.Domain
		require.NoError(c, cp.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "host"}, &d))
		cond := status.Find(d.Status.Conditions, tunav1.ConditionReady)
		require.NotNil(c, cond)
		require.Equal(c, metav1.ConditionTrue, cond.Status, cond.Message)
	}, wait, 50*time.Millisecond, "the Domain is never reserved")
	return ns + "." + harness.BaseDomain
}

// createGateway creates gw and deletes it when the test ends, so that
// the edge's Gateway addresses it holds are free for the next test.
func createGateway(t *testing.T, gw *gwv1.Gateway) {
	t.Helper()
	require.NoError(t, cp.Client.Create(context.Background(), gw))
	t.Cleanup(func() {
		if err := cp.Client.Delete(context.Background(), gw); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting Gateway %s/%s: %v", gw.Namespace, gw.Name, err)
		}
	})
}

// fetchPlain sends GET / with Host host over plain HTTP to at, and
// returns the status, the body and X-Tuna-Error.
func fetchPlain(t require.TestingT, at, host string) (int, string, string) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+at+"/", nil)
	require.NoError(t, err)
	req.Host = host
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body), resp.Header.Get("X-Tuna-Error")
}

// awaitPlain awaits body from at over plain HTTP for Host host.
func awaitPlain(t *testing.T, at, host, want string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body, _ := fetchPlain(c, at, host)
		require.Equal(c, http.StatusOK, code, "%s", body)
		require.Equal(c, want, body)
	}, wait, 50*time.Millisecond, "Host %s on %s never answers %q", host, at, want)
}
