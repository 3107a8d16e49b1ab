package https

import (
	"context"
	"crypto/tls"
	"fmt"
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

// A Gateway's address is reached with any Host, as an in-cluster
// Gateway's load balancer address is: a request whose Host is the
// hostname of one of the Gateway's listeners (or a host under its
// wildcard listener's) reaches that listener's route, one whose Host no
// listener accepts gets the router's 404. The
// address serves its own Gateway's routes only: a neighbour namespace's
// Gateway, with a route for the same hostname, is served on its own
// address, never on this one, and this Gateway's routes never on the
// neighbour's.
func TestGatewayAddressServesListenersWithHostnames(t *testing.T) {
	ctx := context.Background()
	owner := testNamespace(t, "gw-hostnames")
	neighbour := owner + "-neighbour"
	_, err := cp.Namespace(ctx, neighbour)
	require.NoError(t, err)
	ensureGatewayClass(t)
	port := gwv1.PortNumber(edge.Options.GatewayHTTPSPort)

	// The listener's hostname, a Domain of the owner; another listener's
	// hostname nobody reserved, which the controller does not accept.
	require.NoError(t, cp.Client.Create(ctx, &tunav1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: owner, Name: "second"},
		Spec: tunav1.DomainSpec{Subdomain: owner}}))
	second := owner + "." + harness.BaseDomain
	unreserved := "unreserved-" + owner + "." + harness.BaseDomain
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var d tunav1.Domain
		require.NoError(c, cp.Client.Get(ctx, types.NamespacedName{Namespace: owner, Name: "second"}, &d))
		cond := status.Find(d.Status.Conditions, tunav1.ConditionReady)
		require.NotNil(c, cond)
		require.Equal(c, metav1.ConditionTrue, cond.Status, cond.Message)
	}, wait, 50*time.Millisecond, "the Domain is never reserved")

	// The neighbour first: a Gateway without a hostname and a route for
	// the owner's hostname, served on the neighbour's own address.
	neighbourName := "neighbour-" + owner + ".example.test"
	tlsSecret(t, neighbour, neighbourName)
	echo(t, neighbour, "intruder")
	createGateway(t, addressGateway(neighbour, port))
	require.NoError(t, cp.Client.Create(ctx, echoRoute(neighbour, "intruder", gwv1.ParentReference{Name: "gw"}, gwv1.Hostname(second), "neighbour-only.example.test")))
	neighbourAt := net.JoinHostPort(gatewayAddress(t, neighbour), strconv.Itoa(int(port)))
	awaitAnswer(t, neighbourAt, neighbourName, second, "intruder "+second)

	// The owner: listeners without a hostname, with the reserved one and
	// with the unreserved one; the route on the unreserved listener is
	// created before the others, so a table that serves them saw it.
	tlsSecret(t, owner, second)
	gw := addressGateway(owner, port)
	gw.Spec.Listeners = append(gw.Spec.Listeners,
		gwv1.Listener{Name: "second", Protocol: gwv1.HTTPSProtocolType, Port: port, Hostname: ptr(gwv1.Hostname(second)), TLS: gw.Spec.Listeners[0].TLS},
		gwv1.Listener{Name: "unreserved", Protocol: gwv1.HTTPSProtocolType, Port: port, Hostname: ptr(gwv1.Hostname(unreserved)), TLS: gw.Spec.Listeners[0].TLS},
		gwv1.Listener{Name: "wild", Protocol: gwv1.HTTPSProtocolType, Port: port, Hostname: ptr(gwv1.Hostname("*.wild.example.test")), TLS: gw.Spec.Listeners[0].TLS})
	for _, name := range []string{"unreserved", "plain", "second", "wild"} {
		echo(t, owner, name)
	}
	createGateway(t, gw)
	require.NoError(t, cp.Client.Create(ctx, echoRoute(owner, "unreserved", gwv1.ParentReference{Name: "gw", SectionName: ptr(gwv1.SectionName("unreserved"))})))
	require.NoError(t, cp.Client.Create(ctx, echoRoute(owner, "plain", gwv1.ParentReference{Name: "gw"}, "plain.example.test")))
	require.NoError(t, cp.Client.Create(ctx, echoRoute(owner, "second", gwv1.ParentReference{Name: "gw", SectionName: ptr(gwv1.SectionName("second"))})))
	require.NoError(t, cp.Client.Create(ctx, echoRoute(owner, "wild", gwv1.ParentReference{Name: "gw", SectionName: ptr(gwv1.SectionName("wild"))})))
	at := net.JoinHostPort(gatewayAddress(t, owner), strconv.Itoa(int(port)))
	require.NotEqual(t, neighbourAt, at, "two Gateways share an address")

	// A hostnamed listener's route, for its hostname, and the route of the
	// listener without one, for the route's hostname.
	awaitAnswer(t, at, second, second, "second "+second)
	awaitAnswer(t, at, second, "plain.example.test", "plain plain.example.test")
	// A wildcard listener's route, for the hosts under it (on the address
	// only: on this edge, without --any-host, the wildcard's parent is no
	// Domain of the namespace, so it is no wildcard host of its own).
	awaitAnswer(t, at, second, "a.wild.example.test", "wild a.wild.example.test")

	// The unreserved listener is not accepted, so its route is not
	// served: its host gets the 404 of a host nothing routes.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var got gwv1.Gateway
		require.NoError(c, cp.Client.Get(ctx, types.NamespacedName{Namespace: owner, Name: "gw"}, &got))
		require.Len(c, got.Status.Listeners, 4)
		cond := meta.FindStatusCondition(got.Status.Listeners[2].Conditions, string(gwv1.ListenerConditionAccepted))
		require.NotNil(c, cond)
		require.Equal(c, metav1.ConditionFalse, cond.Status, "listener %s", got.Status.Listeners[2].Name)
	}, wait, 50*time.Millisecond)
	for _, host := range []string{unreserved, "unknown.example.test", "neighbour-only.example.test", "wild.example.test"} {
		code, body, reason := fetch(t, at, second, host)
		assert.Equal(t, http.StatusNotFound, code, "Host %s on the owner's address: %s", host, body)
		assert.Equal(t, "no-route", reason, "Host %s: %s", host, body)
	}
	// The neighbour's route for the owner's hostname stays on the
	// neighbour's address, and the owner's routes off it.
	code, body, _ := fetch(t, at, second, second)
	assert.Equal(t, "second "+second, body, "Host %s on the owner's address (%d)", second, code)
	code, body, reason := fetch(t, neighbourAt, neighbourName, "plain.example.test")
	assert.Equal(t, http.StatusNotFound, code, "the owner's route on the neighbour's address: %s", body)
	assert.Equal(t, "no-route", reason)
	code, body, _ = fetch(t, neighbourAt, neighbourName, "a.wild.example.test")
	assert.Equal(t, http.StatusNotFound, code, "the owner's wildcard route on the neighbour's address: %s", body)
	_, body, _ = fetch(t, neighbourAt, neighbourName, second)
	assert.Equal(t, "intruder "+second, body, "the neighbour's address serves its own route")
}

// addressGateway is Gateway "gw" of ns with one HTTPS listener without a
// hostname on port, whose certificate is Secret "cert".
func addressGateway(ns string, port gwv1.PortNumber) *gwv1.Gateway {
	return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"}, Spec: gwv1.GatewaySpec{
		GatewayClassName: gatewayclass.ClassName,
		Listeners: []gwv1.Listener{{Name: "https", Protocol: gwv1.HTTPSProtocolType, Port: port,
			TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}}}},
	}}
}

// echo serves Service name of ns (port 8080), answering "<name> <Host>".
func echo(t *testing.T, ns, name string) {
	t.Helper()
	ip := service(t, ns, name, 8080, "")
	serveHTTP(t, ip, 8080, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", name, r.Host)
	}))
}

// echoRoute is HTTPRoute name of ns to Service name (port 8080).
func echoRoute(ns, name string, parent gwv1.ParentReference, hostnames ...gwv1.Hostname) *gwv1.HTTPRoute {
	return &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{parent}},
		Hostnames:       hostnames,
		Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
			BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: ptr(gwv1.PortNumber(8080))}}}}}},
	}}
}

// ensureGatewayClass creates the GatewayClass tuna, unless a test did.
func ensureGatewayClass(t *testing.T) {
	t.Helper()
	gc := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: gatewayclass.ClassName}, Spec: gwv1.GatewayClassSpec{ControllerName: gatewayclass.ControllerName}}
	if err := cp.Client.Create(context.Background(), gc); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// gatewayAddress awaits Gateway "gw" of ns's own address (the first of
// status.addresses, an IPAddress).
func gatewayAddress(t *testing.T, ns string) string {
	t.Helper()
	var addr string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var gw gwv1.Gateway
		require.NoError(c, cp.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "gw"}, &gw))
		require.NotEmpty(c, gw.Status.Addresses)
		require.Equal(c, gwv1.IPAddressType, *gw.Status.Addresses[0].Type)
		addr = gw.Status.Addresses[0].Value
	}, wait, 50*time.Millisecond, "Gateway %s/gw never gets its own address", ns)
	return addr
}

// fetch sends GET / with Host host over HTTPS to at, verifying the
// certificate for serverName, and returns the status, the body and
// X-Tuna-Error.
func fetch(t require.TestingT, at, serverName, host string) (int, string, string) {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: serverName, MinVersion: tls.VersionTLS12}}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://"+at+"/", nil)
	require.NoError(t, err)
	req.Host = host
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body), resp.Header.Get("X-Tuna-Error")
}

// awaitAnswer awaits body from at for Host host.
func awaitAnswer(t *testing.T, at, serverName, host, want string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body, _ := fetch(c, at, serverName, host)
		require.Equal(c, http.StatusOK, code, "%s", body)
		require.Equal(c, want, body)
	}, wait, 50*time.Millisecond, "Host %s on %s never answers %q", host, at, want)
}
