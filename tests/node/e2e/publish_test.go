//go:build node

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// TestTunnelFromPods: a Tunnel is served by the agent pods: a request from
// the host goes through the edge, an agent pod and the Service's ClusterIP
// to a backend pod, and the Tunnel's status says where.
func TestTunnelFromPods(t *testing.T) {
	ctx := context.Background()
	deployBackend(ctx, t, "web", 1)
	tun := &tunav1.Tunnel{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: appNamespace},
		Spec: tunav1.TunnelSpec{Protocol: tunav1.ProtocolHTTP, Subdomain: "web",
			Upstream: tunav1.TunnelUpstream{URL: "http://web:8080"}},
	}
	if err := env.client.Create(ctx, tun); err != nil {
		t.Fatal(err)
	}
	body := awaitServed(ctx, t, hostURL("web", "/hello"), "web")
	if !strings.Contains(body, " GET /hello") {
		t.Errorf("the backend saw %q", body)
	}
	eventually(ctx, t, time.Minute, func() error {
		if err := env.client.Get(ctx, clientKey(tun), tun); err != nil {
			return err
		}
		if !isTrue(tun.Status.Conditions, "Ready") || tun.Status.URL == "" {
			return fmt.Errorf("tunnel status %+v", tun.Status)
		}
		// Every agent replica holds a session.
		if tun.Status.Sessions != 2 {
			return fmt.Errorf("tunnel has %d sessions, want one per agent replica (2)", tun.Status.Sessions)
		}
		return nil
	})
}

// TestIngressFromPods: an Ingress of class tuna, on a reserved Domain,
// routes by path to two backends, served by the agent pods.
func TestIngressFromPods(t *testing.T) {
	ctx := context.Background()
	deployBackend(ctx, t, "api", 1)
	deployBackend(ctx, t, "site", 1)
	dom := &tunav1.Domain{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: appNamespace}, Spec: tunav1.DomainSpec{Subdomain: "shop"}}
	if err := env.client.Create(ctx, dom); err != nil {
		t.Fatal(err)
	}
	host := "shop." + harnessBaseDomain()
	prefix := networkingv1.PathTypePrefix
	path := func(p, svc string) networkingv1.HTTPIngressPath {
		return networkingv1.HTTPIngressPath{Path: p, PathType: &prefix, Backend: networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: 8080}}}}
	}
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: appNamespace},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr.To("tuna"),
			Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{path("/api", "api"), path("/", "site")},
			}}}},
		},
	}
	if err := env.client.Create(ctx, ing); err != nil {
		t.Fatal(err)
	}
	awaitServed(ctx, t, hostURL("shop", "/api/items"), "api")
	awaitServed(ctx, t, hostURL("shop", "/index.html"), "site")
	eventually(ctx, t, time.Minute, func() error {
		if err := env.client.Get(ctx, clientKey(ing), ing); err != nil {
			return err
		}
		if lb := ing.Status.LoadBalancer.Ingress; len(lb) != 1 || lb[0].Hostname != host {
			return fmt.Errorf("ingress status.loadBalancer %+v, want %s", lb, host)
		}
		return nil
	})
}

// TestLoadBalancerFromPods: a Service of type LoadBalancer and class tuna
// gets a public TCP port on the edge (in its status), and a connection to
// it reaches a backend pod's echo server through an agent pod.
func TestLoadBalancerFromPods(t *testing.T) {
	ctx := context.Background()
	deployBackend(ctx, t, "db", 1)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "db-public", Namespace: appNamespace},
		Spec: corev1.ServiceSpec{
			Type:              corev1.ServiceTypeLoadBalancer,
			LoadBalancerClass: ptr.To("k8s.tuna.am/tuna"),
			Selector:          map[string]string{"app": "db"},
			Ports:             []corev1.ServicePort{{Name: "echo", Port: 9000, TargetPort: intstr.FromInt32(9000)}},
		},
	}
	if _, err := env.cluster.Client.CoreV1().Services(appNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// status.loadBalancer holds the edge's TCP host and the Service port;
	// the public port is the address of the port's TCPEndpoint.
	eventually(ctx, t, 3*time.Minute, func() error {
		s, err := env.cluster.Client.CoreV1().Services(appNamespace).Get(ctx, "db-public", metav1.GetOptions{})
		if err != nil {
			return err
		}
		lb := s.Status.LoadBalancer.Ingress
		if len(lb) != 1 || lb[0].IP != "127.0.0.1" || len(lb[0].Ports) != 1 || lb[0].Ports[0].Error != nil ||
			lb[0].IPMode == nil || *lb[0].IPMode != corev1.LoadBalancerIPModeProxy {
			return fmt.Errorf("status.loadBalancer %+v", lb)
		}
		return nil
	})
	var addr string
	eventually(ctx, t, time.Minute, func() error {
		ep := &tunav1.TCPEndpoint{}
		if err := env.client.Get(ctx, ctrlclient.ObjectKey{Namespace: appNamespace, Name: "db-public-9000"}, ep); err != nil {
			return err
		}
		if addr = ep.Status.Address; addr == "" {
			return fmt.Errorf("TCPEndpoint db-public-9000 has no address yet: %+v", ep.Status)
		}
		return echoOnce(addr, "ping\n")
	})
	t.Logf("LoadBalancer Service published at %s", addr)
}

// echoOnce writes msg to addr and expects it back.
func echoOnce(addr, msg string) error {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, msg); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(conn, buf); err != nil {
		return fmt.Errorf("reading the echo from %s: %w", addr, err)
	}
	if string(buf) != msg {
		return fmt.Errorf("echo from %s: %q, want %q", addr, buf, msg)
	}
	return nil
}
