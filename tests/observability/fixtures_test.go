package observability

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/ingress"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// wait bounds every wait for the operator (processes on two busy cores).
const wait = 60 * time.Second

// namespace creates a fresh namespace for one test; its number is also a
// token for names that are global on the edge.
func namespace(t *testing.T, what string) string {
	t.Helper()
	return env.Namespace(t, "obs", what)
}

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	require.NoError(t, env.CP.Client.Create(context.Background(), obj))
}

// echoService creates a Service with an echo backend on its ClusterIP.
func echoService(t *testing.T, ns, name string, port int32) {
	t.Helper()
	svc, err := harness.CreateService(context.Background(), env.CP.Client, ns, name, harness.ServicePort{Port: port})
	require.NoError(t, err)
	b, err := harness.ServeEcho(fmt.Sprintf("%s-%d", name, port), svc.Spec.ClusterIP, port)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
}

// greeterService creates a Service with a line-echo TCP server on its
// ClusterIP that greets first, as PostgreSQL or SMTP do.
func greeterService(t *testing.T, ns, name string, port int32) {
	t.Helper()
	svc, err := harness.CreateService(context.Background(), env.CP.Client, ns, name, harness.ServicePort{Port: port})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(port))))
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
				fmt.Fprintf(conn, "HELLO\n")
				r := bufio.NewReader(conn)
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

func httpTunnel(ns, name, subdomain, upstream string) *tunav1.Tunnel {
	return &tunav1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: tunav1.TunnelSpec{Protocol: tunav1.ProtocolHTTP, Subdomain: subdomain, Upstream: tunav1.TunnelUpstream{URL: upstream}}}
}

func tcpTunnel(ns, name, alias, upstream string) *tunav1.Tunnel {
	return &tunav1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: tunav1.TunnelSpec{Protocol: tunav1.ProtocolTCP, PortOrAlias: alias, Upstream: tunav1.TunnelUpstream{URL: upstream}}}
}

// waitReady waits until a Tunnel's Ready condition has status and reason.
func waitReady(t *testing.T, k types.NamespacedName, want metav1.ConditionStatus, reason string) *tunav1.Tunnel {
	t.Helper()
	return env.WaitReady(t, k, want, reason)
}

// waitObjectReady waits until obj's Ready condition is True.
func waitObjectReady(t *testing.T, obj client.Object, conds func() []metav1.Condition) {
	t.Helper()
	env.WaitCondition(t, obj, client.ObjectKeyFromObject(obj), conds, metav1.ConditionTrue, "")
}

// deleteAndWait deletes obj and waits until its finalizers ran.
func deleteAndWait(t *testing.T, obj client.Object) {
	t.Helper()
	env.DeleteAndWait(t, obj, client.ObjectKeyFromObject(obj))
}

// publicClient sends requests to the edge's public HTTP listener whatever
// the URL's host, as DNS for *.tuna.localhost would.
func publicClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, env.Edge.HTTPAddr())
		},
		DisableKeepAlives: true,
	}}
}

// fetch GETs url through the edge and returns the status and body.
func fetch(url string) (int, string, error) {
	resp, err := publicClient().Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// waitServed waits until url answers 200 from backend.
func waitServed(t *testing.T, url, backend string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body, err := fetch(url)
		require.NoError(c, err)
		assert.Equal(c, http.StatusOK, code, "body: %s", body)
		assert.Contains(c, body, `"backend":"`+backend+`"`)
	}, wait, 100*time.Millisecond, "%s never served by %s", url, backend)
}

// tcpRoundTrip reads the greeting at addr, sends a line and reads its echo.
func tcpRoundTrip(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	if greeting, err := r.ReadString('\n'); err != nil || greeting != "HELLO\n" {
		return fmt.Errorf("greeting %q: %w", greeting, err)
	}
	msg := "ping " + strings.Repeat("x", 512) + "\n"
	if _, err := conn.Write([]byte(msg)); err != nil {
		return err
	}
	if got, err := r.ReadString('\n'); err != nil || got != "ECHO "+msg {
		return fmt.Errorf("echo %q: %w", got, err)
	}
	return nil
}

// fixture is everything whose traffic the dashboards show: an HTTP
// Tunnel, a tcp Tunnel through a TCPEndpoint, an Ingress host on a
// reserved Domain with several routes (updated once while it runs), and a
// SecretSync. Traffic runs until the test ends.
type fixture struct {
	ns              string
	tunnelURL, host string
	tcpAddr         string
	ok, failed      atomic.Int64
	stopped         chan struct{}
	stopOnce        sync.Once
	cancelTraffic   context.CancelFunc
}

func startFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	ns := namespace(t, "traffic")
	tok := strings.SplitN(ns, "-", 3)[1]
	fx := &fixture{ns: ns}
	echoService(t, ns, "web", 8080)
	echoService(t, ns, "api", 8081)
	greeterService(t, ns, "pg", 5432)

	create(t, httpTunnel(ns, "web", "obs-web-"+tok, "http://web:8080"))
	ep := &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pg"}, Spec: tunav1.TCPEndpointSpec{Alias: "obs-pg-" + tok}}
	create(t, ep)
	create(t, tcpTunnel(ns, "pg", "obs-pg-"+tok, "tcp://pg:5432"))
	d := &tunav1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"}, Spec: tunav1.DomainSpec{Subdomain: "obs-shop-" + tok}}
	create(t, d)
	secretName := ns + "/db"
	_, err := env.Edge.Client(env.Edge.AdminKey).PutSecret(ctx, secretName, apiwire.PutSecret{Data: map[string][]byte{"password": []byte("pw-" + tok)}})
	require.NoError(t, err)
	ss := &tunav1.SecretSync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Spec: tunav1.SecretSyncSpec{
		Source: tunav1.SecretSyncSource{Name: secretName}, Target: tunav1.SecretSyncTarget{Name: "db-credentials"}}}
	create(t, ss)

	fx.tunnelURL = waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected).Status.URL
	waitObjectReady(t, ep, func() []metav1.Condition { return ep.Status.Conditions })
	fx.tcpAddr = ep.Status.Address
	waitReady(t, key(ns, "pg"), metav1.ConditionTrue, tunav1.ReasonConnected)
	waitObjectReady(t, d, func() []metav1.Condition { return d.Status.Conditions })
	fx.host = d.Status.FQDN
	waitObjectReady(t, ss, func() []metav1.Condition { return ss.Status.Conditions })

	ic := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: ingress.ClassName}, Spec: networkingv1.IngressClassSpec{Controller: ingress.ControllerName}}
	if err := env.CP.Client.Create(ctx, ic); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	class := ingress.ClassName
	prefix, exact := networkingv1.PathTypePrefix, networkingv1.PathTypeExact
	backend := func(svc string, port int32) networkingv1.IngressBackend {
		return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: port}}}
	}
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"}, Spec: networkingv1.IngressSpec{
		IngressClassName: &class,
		Rules: []networkingv1.IngressRule{{Host: fx.host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{
				{Path: "/api", PathType: &prefix, Backend: backend("api", 8081)},
				{Path: "/", PathType: &prefix, Backend: backend("web", 8080)},
			}}}}},
	}}
	create(t, ing)
	waitServed(t, "http://"+fx.host+"/api/users", "api-8081")
	// A route update while the host runs: tuna_ingress_route_updates_total.
	// The controller writes the Ingress's status meanwhile, so the update
	// is retried on a conflict, as any client sharing an object must.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.CP.Client.Get(ctx, key(ns, "shop"), ing); err != nil {
			return err
		}
		paths := &ing.Spec.Rules[0].HTTP.Paths
		*paths = append(*paths, networkingv1.HTTPIngressPath{Path: "/healthz", PathType: &exact, Backend: backend("api", 8081)})
		return env.CP.Client.Update(ctx, ing)
	}))
	waitServed(t, "http://"+fx.host+"/healthz", "api-8081")

	// A second reservation, seconds after the first: the same edge API
	// operation seen twice in the controller's histograms, as the resync
	// does every minute, so the latency panels have a rate to draw.
	extra := &tunav1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "extra"}, Spec: tunav1.DomainSpec{Subdomain: "obs-extra-" + tok}}
	create(t, extra)
	waitObjectReady(t, extra, func() []metav1.Condition { return extra.Status.Conditions })

	trafficCtx, cancel := context.WithCancel(ctx)
	fx.cancelTraffic, fx.stopped = cancel, make(chan struct{})
	go fx.traffic(trafficCtx)
	t.Cleanup(func() {
		fx.stop()
		deleteAndWait(t, ing)
		for _, obj := range []client.Object{ss, &tunav1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}},
			&tunav1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pg"}}, ep, d, extra} {
			deleteAndWait(t, obj)
		}
	})
	return fx
}

// traffic sends a round of requests every 200 ms: the Tunnel, three routes
// of the Ingress host and a TCP round trip, counting rounds that passed.
func (fx *fixture) traffic(ctx context.Context) {
	defer close(fx.stopped)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ok := true
		for _, u := range []string{fx.tunnelURL + "/t", "http://" + fx.host + "/api/users", "http://" + fx.host + "/", "http://" + fx.host + "/healthz"} {
			if code, _, err := fetch(u); err != nil || code != http.StatusOK {
				ok = false
			}
		}
		if err := tcpRoundTrip(fx.tcpAddr); err != nil {
			ok = false
		}
		if ok {
			fx.ok.Add(1)
		} else {
			fx.failed.Add(1)
		}
	}
}

func (fx *fixture) stop() {
	fx.stopOnce.Do(func() { fx.cancelTraffic(); <-fx.stopped })
}
