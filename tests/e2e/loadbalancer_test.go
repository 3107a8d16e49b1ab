package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/loadbalancer"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// lbService is a Service of type LoadBalancer of class k8s.tuna.am/tuna
// (class "" leaves it classless).
func lbService(ns, name, class string, ports ...corev1.ServicePort) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: ports}}
	if class != "" {
		svc.Spec.LoadBalancerClass = &class
	}
	return svc
}

func tcpPort(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, TargetPort: intstr.FromInt32(port), Protocol: corev1.ProtocolTCP}
}

// waitService waits until check passes on the Service and returns it.
func waitService(t *testing.T, ns, name string, check func(c *assert.CollectT, svc *corev1.Service)) *corev1.Service {
	t.Helper()
	var svc corev1.Service
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.CP.Client.Get(context.Background(), key(ns, name), &svc))
		check(c, &svc)
	}, wait, 50*time.Millisecond)
	return &svc
}

// portsOf lists "host port error" for each port of status.loadBalancer.
func portsOf(svc *corev1.Service) []string {
	var out []string
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		host := ing.Hostname
		if ing.IP != "" {
			host = ing.IP
		}
		for _, p := range ing.Ports {
			e := ""
			if p.Error != nil {
				e = " " + *p.Error
			}
			out = append(out, fmt.Sprintf("%s %d/%s%s", host, p.Port, p.Protocol, e))
		}
	}
	return out
}

// serviceEvents are the events recorded for a Service, by reason.
func serviceEvents(t require.TestingT, ns, name string) map[string][]string {
	var list eventsv1.EventList
	require.NoError(t, env.CP.Client.List(context.Background(), &list, client.InNamespace(ns)))
	out := map[string][]string{}
	for _, e := range list.Items {
		if e.Regarding.Kind == "Service" && e.Regarding.Name == name {
			out[e.Reason] = append(out[e.Reason], e.Note)
		}
	}
	return out
}

func waitServiceEvent(t *testing.T, ns, name, reason string, mentions ...string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := serviceEvents(c, ns, name)
		for _, msg := range got[reason] {
			ok := true
			for _, m := range mentions {
				ok = ok && strings.Contains(msg, m)
			}
			if ok {
				return
			}
		}
		assert.Fail(c, fmt.Sprintf("no %s event mentioning %q on Service %s/%s; have %v", reason, mentions, ns, name, got))
	}, wait, 50*time.Millisecond)
}

// greetTCP dials addr and checks the greeting of serveGreeter on want.
func greetTCP(t require.TestingT, addr, want string) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "HELLO from "+want+"\n", line)
	_, err = fmt.Fprintf(conn, "ping %s\n", want)
	require.NoError(t, err)
	line, err = r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ECHO ping "+want+"\n", line)
}

// A LoadBalancer Service with two TCP ports and one HTTP port (the
// example): real TCP clients and HTTP requests reach the backends through
// the edge, status.loadBalancer lists the addresses with per-port status,
// the ports' Tunnels and TCPEndpoints belong to the Service, and deleting
// the Service releases its ports on the edge.
func TestLoadBalancerService(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	applyExample(t, ns, "service-loadbalancer.yaml", nil)
	var svc corev1.Service
	require.NoError(t, env.CP.Client.Get(ctx, key(ns, "db"), &svc))
	ip := svc.Spec.ClusterIP
	serveGreeter(t, ip, 5432, nil)
	serveGreeter(t, ip, 6379, nil)
	web, err := harness.ServeEcho("db-web", ip, 80)
	require.NoError(t, err)
	t.Cleanup(func() { _ = web.Close() })

	host := ns + "-db." + harness.BaseDomain
	got := waitService(t, ns, "db", func(c *assert.CollectT, svc *corev1.Service) {
		assert.Equal(c, []string{"127.0.0.1 5432/TCP", "127.0.0.1 6379/TCP", host + " 80/TCP"}, portsOf(svc))
	})
	assert.Contains(t, got.Finalizers, "service.kubernetes.io/load-balancer-cleanup")
	require.Len(t, got.Status.LoadBalancer.Ingress, 2)
	require.NotNil(t, got.Status.LoadBalancer.Ingress[0].IPMode)
	assert.Equal(t, corev1.LoadBalancerIPModeProxy, *got.Status.LoadBalancer.Ingress[0].IPMode, "the edge's IP is reached through the edge, not short-cut to the Service")

	var addrs []string
	for _, port := range []int32{5432, 6379} {
		name := "db-" + strconv.Itoa(int(port))
		ep := waitEndpoint(t, ns, name, tunav1.ReasonReserved)
		assert.Equal(t, ns+"-db-"+strconv.Itoa(int(port)), ep.Spec.Alias, "the default alias")
		tun := waitReady(t, key(ns, name), metav1.ConditionTrue, tunav1.ReasonConnected)
		assert.Equal(t, "tcp://"+ep.Status.Address, tun.Status.URL)
		for _, obj := range []metav1.Object{ep, tun} {
			owner := metav1.GetControllerOf(obj)
			require.NotNil(t, owner, "%s has no controlling owner", obj.GetName())
			assert.Equal(t, []any{"Service", "db", got.UID}, []any{owner.Kind, owner.Name, owner.UID})
			assert.Equal(t, "db", obj.GetLabels()[tunav1.LabelService])
		}
		greetTCP(t, ep.Status.Address, net.JoinHostPort(ip, strconv.Itoa(int(port))))
		addrs = append(addrs, ep.Status.Address)
	}
	tun := waitReady(t, key(ns, "db-80"), metav1.ConditionTrue, tunav1.ReasonConnected)
	assert.Equal(t, "http://"+host, strings.Split(tun.Status.URL, ":")[0]+":"+strings.Split(tun.Status.URL, ":")[1])
	e := getEcho(t, "http://"+host+"/orders")
	assert.Equal(t, []string{"db-web", "/orders", host}, []string{e.Backend, e.Path, e.Host})
	for _, port := range []string{"5432 (postgres)", "6379 (redis)", "80 (web)"} {
		waitServiceEvent(t, ns, "db", loadbalancer.ReasonPublished, "port "+port+" is published at")
	}

	// The controller's metrics count it from the cache at scrape time.
	assert.GreaterOrEqual(t, gauge(t, "tuna_loadbalancer_services", ""), 1.0)
	assert.GreaterOrEqual(t, gauge(t, "tuna_loadbalancer_ports", "published"), 3.0)

	// Deleting the Service waits for its Tunnels and TCPEndpoints, whose
	// finalizers revoke the keys and release the ports.
	aliases := []string{ns + "-db-5432", ns + "-db-6379"}
	deleteAndWait(t, &corev1.Service{}, key(ns, "db"))
	api := env.Edge.Client(env.Edge.AdminKey)
	for i, alias := range aliases {
		_, err := api.GetTCPEndpoint(ctx, alias)
		assert.True(t, apiwire.IsNotFound(err), "port of %s is still reserved: %v", alias, err)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			conn, err := net.DialTimeout("tcp", addrs[i], time.Second)
			if err == nil {
				conn.Close()
			}
			assert.Error(c, err, "%s still accepts connections", addrs[i])
		}, wait, 50*time.Millisecond)
	}
	for _, name := range []string{"db-5432", "db-6379", "db-80"} {
		assert.True(t, apierrors.IsNotFound(env.CP.Client.Get(ctx, key(ns, name), &tunav1.Tunnel{})), "Tunnel %s outlived its Service", name)
	}
	code, body := get(t, "http://"+host+"/")
	assert.Equal(t, http.StatusNotFound, code, "%s", body)
}

// Changing the type away from LoadBalancer unpublishes: the ports'
// resources are deleted (the port released), status.loadBalancer is
// cleared, the finalizer goes and the Service stays. A classless
// LoadBalancer Service and one of another class are left alone.
func TestLoadBalancerTypeChangeAndClasses(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	other := lbService(ns, "other", "example.com/other-lb", tcpPort("pg", 5433))
	classless := lbService(ns, "classless", "", tcpPort("pg", 5434))
	require.NoError(t, env.CP.Client.Create(ctx, other))
	require.NoError(t, env.CP.Client.Create(ctx, classless))
	require.NoError(t, env.CP.Client.Create(ctx, lbService(ns, "pg", tunav1.LoadBalancerClassShort, tcpPort("pg", 5432))))
	var svc corev1.Service
	require.NoError(t, env.CP.Client.Get(ctx, key(ns, "pg"), &svc))
	serveGreeter(t, svc.Spec.ClusterIP, 5432, nil)
	waitService(t, ns, "pg", func(c *assert.CollectT, svc *corev1.Service) {
		assert.Equal(c, []string{"127.0.0.1 5432/TCP"}, portsOf(svc), "the short class tuna is served too")
	})
	ep := waitEndpoint(t, ns, "pg-5432", tunav1.ReasonReserved)
	greetTCP(t, ep.Status.Address, net.JoinHostPort(svc.Spec.ClusterIP, "5432"))

	// The others were created first: had they been served, they would be
	// by now.
	for _, name := range []string{"other", "classless"} {
		var s corev1.Service
		require.NoError(t, env.CP.Client.Get(ctx, key(ns, name), &s))
		assert.Empty(t, s.Finalizers, "%s got a finalizer", name)
		assert.Empty(t, s.Status.LoadBalancer.Ingress, "%s got a status", name)
		assert.True(t, apierrors.IsNotFound(env.CP.Client.Get(ctx, key(ns, name+"-5433"), &tunav1.Tunnel{})))
	}

	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur corev1.Service
		if err := env.CP.Client.Get(ctx, key(ns, "pg"), &cur); err != nil {
			return err
		}
		cur.Spec.Type, cur.Spec.LoadBalancerClass = corev1.ServiceTypeClusterIP, nil
		cur.Spec.AllocateLoadBalancerNodePorts = nil
		for i := range cur.Spec.Ports {
			cur.Spec.Ports[i].NodePort = 0
		}
		return env.CP.Client.Update(ctx, &cur)
	}))
	waitService(t, ns, "pg", func(c *assert.CollectT, svc *corev1.Service) {
		assert.Empty(c, svc.Status.LoadBalancer.Ingress)
		assert.NotContains(c, svc.Finalizers, "service.kubernetes.io/load-balancer-cleanup")
	})
	assert.True(t, apierrors.IsNotFound(env.CP.Client.Get(ctx, key(ns, "pg-5432"), &tunav1.TCPEndpoint{})))
	_, err := env.Edge.Client(env.Edge.AdminKey).GetTCPEndpoint(ctx, ep.Spec.Alias)
	assert.True(t, apiwire.IsNotFound(err), "the port is still reserved: %v", err)
	waitServiceEvent(t, ns, "pg", loadbalancer.ReasonUnpublished, "no longer of type LoadBalancer")
}

// gauge reads a gauge of this process's registry (the components run
// here), the series whose state label is state ("" for none).
func gauge(t *testing.T, name, state string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			got := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "state" {
					got = l.GetValue()
				}
			}
			if got == state {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no gauge %s{state=%q}", name, state)
	return 0
}
