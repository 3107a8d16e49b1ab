package e2e

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
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/loadbalancer"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/lbclass"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/testca"
)

// The annotations, each checked on real traffic: a TCP port on a
// TCPEndpoint of the namespace (which outlives the Service), an HTTP port
// on a chosen subdomain, a port made HTTP by annotation, an https port
// verified with a CA named by annotation, and a UDP port refused with a
// reason.
func TestLoadBalancerAnnotations(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	alias := "pg-" + tag(ns)
	require.NoError(t, env.CP.Client.Create(ctx, &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "postgres"},
		Spec: tunav1.TCPEndpointSpec{Alias: alias}}))
	reserved := waitEndpoint(t, ns, "postgres", tunav1.ReasonReserved)

	ca, err := testca.New("lb CA")
	require.NoError(t, err)
	require.NoError(t, env.CP.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trust"},
		Data: map[string]string{"ca.crt": string(ca.PEM)}}))
	https := "https"
	dns := corev1.ServicePort{Name: "dns", Port: 53, TargetPort: intstr.FromInt32(53), Protocol: corev1.ProtocolUDP}
	secure := corev1.ServicePort{Name: "secure", Port: 8443, TargetPort: intstr.FromInt32(8443), AppProtocol: &https}
	svc := lbService(ns, "app", tunav1.LoadBalancerClass, tcpPort("postgres", 5432), tcpPort("metrics", 9090), secure, dns)
	shop := "shop-" + tag(ns)
	svc.Annotations = map[string]string{
		tunav1.AnnotationTCPEndpoint: "postgres",
		tunav1.AnnotationHTTPPorts:   "metrics",
		tunav1.AnnotationSubdomain:   "metrics=" + shop + ",secure=" + shop + "-tls",
		tunav1.AnnotationUpstreamCA:  "configmap/trust",
	}
	require.NoError(t, env.CP.Client.Create(ctx, svc))
	ip := svc.Spec.ClusterIP
	serveGreeter(t, ip, 5432, nil)
	metrics, err := harness.ServeEcho("app-metrics", ip, 9090)
	require.NoError(t, err)
	t.Cleanup(func() { _ = metrics.Close() })
	cert, err := ca.Issue("app." + ns + ".svc")
	require.NoError(t, err)
	tlsBackend, err := harness.ServeTLSEcho("app-secure", ip, 8443, cert)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tlsBackend.Close() })

	shopHost, tlsHost := shop+"."+harness.BaseDomain, shop+"-tls."+harness.BaseDomain
	waitService(t, ns, "app", func(c *assert.CollectT, svc *corev1.Service) {
		assert.Equal(c, []string{"127.0.0.1 5432/TCP", shopHost + " 9090/TCP", tlsHost + " 8443/TCP"}, portsOf(svc),
			"the UDP port is not listed")
	})
	greetTCP(t, reserved.Status.Address, net.JoinHostPort(ip, "5432"))
	assert.True(t, apierrors.IsNotFound(env.CP.Client.Get(ctx, key(ns, "app-5432"), &tunav1.TCPEndpoint{})), "no TCPEndpoint is reserved for a port on a chosen one")
	assert.Equal(t, "app-metrics", getEcho(t, "http://"+shopHost+"/m").Backend)
	assert.Equal(t, "app-secure", getEcho(t, "http://"+tlsHost+"/").Backend, "the https port is verified with the annotation's CA")
	waitServiceEvent(t, ns, "app", loadbalancer.ReasonUnsupportedProtocol, "port 53 (dns) is UDP")

	deleteAndWait(t, &corev1.Service{}, key(ns, "app"))
	still := waitEndpoint(t, ns, "postgres", tunav1.ReasonReserved)
	assert.Equal(t, reserved.Status.Port, still.Status.Port, "the namespace's TCPEndpoint is the user's: it stays")
	_, err = env.Edge.Client(env.Edge.AdminKey).GetTCPEndpoint(ctx, alias)
	assert.NoError(t, err)
}

// Client networks: a Service whose allowed networks leave loopback out
// refuses the test's clients, over TCP and HTTP alike.
func TestLoadBalancerSourceRanges(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	svc := lbService(ns, "closed", tunav1.LoadBalancerClass, tcpPort("pg", 5432), corev1.ServicePort{Name: "web", Port: 80, TargetPort: intstr.FromInt32(80), AppProtocol: ptr("http")})
	svc.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
	require.NoError(t, env.CP.Client.Create(ctx, svc))
	serveGreeter(t, svc.Spec.ClusterIP, 5432, nil)
	echo, err := harness.ServeEcho("closed-web", svc.Spec.ClusterIP, 80)
	require.NoError(t, err)
	t.Cleanup(func() { _ = echo.Close() })
	ep := waitEndpoint(t, ns, "closed-5432", tunav1.ReasonReserved)
	tcp := waitReady(t, key(ns, "closed-5432"), metav1.ConditionTrue, tunav1.ReasonConnected)
	assert.Equal(t, []string{"203.0.113.0/24"}, tcp.Spec.AllowCIDRs)
	web := waitReady(t, key(ns, "closed-80"), metav1.ConditionTrue, tunav1.ReasonConnected)

	code, body := get(t, web.Status.URL+"/")
	assert.Equal(t, http.StatusForbidden, code, "%s", body)
	conn, err := net.DialTimeout("tcp", ep.Status.Address, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	n, err := conn.Read(make([]byte, 64))
	assert.Equal(t, 0, n, "a refused client gets no byte of the backend")
	assert.ErrorIs(t, err, io.EOF)
}

// Tenancy as everywhere: an alias another namespace reserved is not taken
// (AddressOwned, an event on the Service naming the owner, the port left
// out of status); another namespace's TCPEndpoint is used once it is shared
// with the Service's namespace (spec.sharedWith), and not before; a Tunnel
// of the port's name that the Service does not own is left alone
// (NameTaken).
func TestLoadBalancerTenancy(t *testing.T) {
	ctx := context.Background()
	owner, ns := namespace(t), namespace(t)
	alias := "owned-" + tag(owner)
	require.NoError(t, env.CP.Client.Create(ctx, &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: owner, Name: "pg"},
		Spec: tunav1.TCPEndpointSpec{Alias: alias}}))
	require.NoError(t, env.CP.Client.Create(ctx, &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: owner, Name: "cache"},
		Spec: tunav1.TCPEndpointSpec{Alias: "cache-" + tag(owner)}}))
	theirs := waitEndpoint(t, owner, "pg", tunav1.ReasonReserved)
	cache := waitEndpoint(t, owner, "cache", tunav1.ReasonReserved)

	mine := httpTunnel(ns, "app-80", "mine-"+tag(ns), "http://app:80")
	require.NoError(t, env.CP.Client.Create(ctx, mine))
	svc := lbService(ns, "app", tunav1.LoadBalancerClass, tcpPort("pg", 5432), tcpPort("web", 80), tcpPort("redis", 6379), tcpPort("mc", 11211))
	svc.Annotations = map[string]string{tunav1.AnnotationAlias: "5432=" + alias, tunav1.AnnotationHTTPPorts: "web",
		tunav1.AnnotationTCPEndpoint: "redis=" + owner + "/cache"}
	require.NoError(t, env.CP.Client.Create(ctx, svc))
	serveGreeter(t, svc.Spec.ClusterIP, 6379, nil)
	serveGreeter(t, svc.Spec.ClusterIP, 11211, nil)

	waitServiceEvent(t, ns, "app", tunav1.ReasonAddressOwned, "port 5432 (pg)", alias, owner)
	waitServiceEvent(t, ns, "app", tunav1.ReasonAddressOwned, "port 6379 (redis)", owner)
	waitServiceEvent(t, ns, "app", loadbalancer.ReasonNameTaken, "Tunnel "+ns+"/app-80 already exists")
	waitService(t, ns, "app", func(c *assert.CollectT, svc *corev1.Service) {
		assert.Equal(c, []string{"127.0.0.1 11211/TCP"}, portsOf(svc), "only the port that is ours")
	})
	var cur tunav1.Tunnel
	require.NoError(t, env.CP.Client.Get(ctx, key(ns, "app-80"), &cur))
	assert.Nil(t, metav1.GetControllerOf(&cur), "the user's Tunnel is not taken over")
	assert.Equal(t, "mine-"+tag(ns), cur.Spec.Subdomain)

	// The owner shares its cache endpoint: the redis port is published on
	// it, without touching the Service.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var ep tunav1.TCPEndpoint
		if err := env.CP.Client.Get(ctx, key(owner, "cache"), &ep); err != nil {
			return err
		}
		ep.Spec.SharedWith = []string{ns}
		return env.CP.Client.Update(ctx, &ep)
	}))
	waitService(t, ns, "app", func(c *assert.CollectT, svc *corev1.Service) {
		assert.Equal(c, []string{"127.0.0.1 6379/TCP", "127.0.0.1 11211/TCP"}, portsOf(svc))
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		greetTCP(c, cache.Status.Address, net.JoinHostPort(svc.Spec.ClusterIP, "6379"))
	}, wait, 50*time.Millisecond)

	deleteAndWait(t, &corev1.Service{}, key(ns, "app"))
	again := waitEndpoint(t, owner, "pg", tunav1.ReasonReserved)
	assert.Equal(t, theirs.Status.Port, again.Status.Port, "the owner's reservation is untouched")
	waitEndpoint(t, owner, "cache", tunav1.ReasonReserved)
	require.NoError(t, env.CP.Client.Get(ctx, key(ns, "app-80"), &cur), "the user's Tunnel outlives the Service")
}

// The finalizer holds a Service deleted while the controller is down; the
// controller, once back, releases its port and lets it go.
func TestLoadBalancerDeletedWhileControllerDown(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	require.NoError(t, env.CP.Client.Create(ctx, lbService(ns, "pg", tunav1.LoadBalancerClass, tcpPort("pg", 5432))))
	ep := waitEndpoint(t, ns, "pg-5432", tunav1.ReasonReserved)
	waitService(t, ns, "pg", func(c *assert.CollectT, svc *corev1.Service) {
		assert.Contains(c, svc.Finalizers, lbclass.Finalizer)
	})
	stopController(t)
	var svc corev1.Service
	require.NoError(t, env.CP.Client.Get(ctx, key(ns, "pg"), &svc))
	require.NoError(t, env.CP.Client.Delete(ctx, &svc))
	require.NoError(t, env.CP.Client.Get(ctx, key(ns, "pg"), &svc), "the finalizer keeps the Service while the controller is down")
	assert.NotNil(t, svc.DeletionTimestamp)
	_, err := env.Edge.Client(env.Edge.AdminKey).GetTCPEndpoint(ctx, ep.Spec.Alias)
	require.NoError(t, err, "nothing is released while the controller is down")

	env.Controller = startController()
	deleteAndWait(t, &corev1.Service{}, key(ns, "pg"))
	_, err = env.Edge.Client(env.Edge.AdminKey).GetTCPEndpoint(ctx, ep.Spec.Alias)
	assert.True(t, apiwire.IsNotFound(err), "the port of %s is still reserved: %v", strconv.Itoa(int(ep.Status.Port)), err)
}

func ptr[T any](v T) *T { return &v }

// loadBalancer.classless (--load-balancer-classless) publishes
// LoadBalancer Services without a class; turned off again, the Services it
// published are unpublished. A classless Service another load balancer
// serves (its cleanup finalizer and status) is never touched.
func TestLoadBalancerClassless(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	restartController(t, func(o *app.ControllerOptions) { o.LoadBalancer.Classless = true })
	require.NoError(t, env.CP.Client.Create(ctx, lbService(ns, "mine", "", tcpPort("pg", 5432))))
	waitService(t, ns, "mine", func(c *assert.CollectT, svc *corev1.Service) {
		assert.Equal(c, []string{"127.0.0.1 5432/TCP"}, portsOf(svc))
	})
	ep := waitEndpoint(t, ns, "mine-5432", tunav1.ReasonReserved)

	restartController(t)
	waitService(t, ns, "mine", func(c *assert.CollectT, svc *corev1.Service) {
		assert.Empty(c, svc.Status.LoadBalancer.Ingress)
		assert.NotContains(c, svc.Finalizers, lbclass.Finalizer)
	})
	_, err := env.Edge.Client(env.Edge.AdminKey).GetTCPEndpoint(ctx, ep.Spec.Alias)
	assert.True(t, apiwire.IsNotFound(err), "the port is still reserved: %v", err)

	// Another load balancer's classless Service: its finalizer and status,
	// written by its own controller.
	cloud := lbService(ns, "cloud", "", tcpPort("pg", 5433))
	cloud.Finalizers = []string{lbclass.Finalizer}
	require.NoError(t, env.CP.Client.Create(ctx, cloud, client.FieldOwner("cloud-controller")))
	cloud.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}}
	require.NoError(t, env.CP.Client.Status().Update(ctx, cloud, client.FieldOwner("cloud-controller")))
	// Created after it: once this one is published, the other was looked at.
	require.NoError(t, env.CP.Client.Create(ctx, lbService(ns, "after", tunav1.LoadBalancerClass, tcpPort("pg", 5434))))
	waitService(t, ns, "after", func(c *assert.CollectT, svc *corev1.Service) {
		assert.Equal(c, []string{"127.0.0.1 5434/TCP"}, portsOf(svc))
	})
	var got corev1.Service
	require.NoError(t, env.CP.Client.Get(ctx, key(ns, "cloud"), &got))
	assert.Contains(t, got.Finalizers, lbclass.Finalizer, "another load balancer's finalizer was removed")
	require.Len(t, got.Status.LoadBalancer.Ingress, 1)
	assert.Equal(t, "198.51.100.7", got.Status.LoadBalancer.Ingress[0].IP, "another load balancer's status was changed")
	assert.True(t, apierrors.IsNotFound(env.CP.Client.Get(ctx, key(ns, "cloud-5433"), &tunav1.Tunnel{})))
	update(t, &got, func(s *corev1.Service) { s.Finalizers = nil })
	deleteAndWait(t, &corev1.Service{}, key(ns, "after"))
}
