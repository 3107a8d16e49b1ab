package cluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// serveTCPEcho answers every line on ip:port with the same line, as the
// Service's backend.
func serveTCPEcho(t *testing.T, ip string, port int) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(port)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
}

// A TCP Tunnel reserved through the operator has one port on every node,
// and each node carries its streams through its own sessions of the two
// agent replicas.
func TestAgentsServeTCPThroughEveryNode(t *testing.T) {
	o := startOperatorOnCluster(t, 3)
	ctx := context.Background()
	ns := o.tun.Namespace
	svc, err := harness.CreateService(ctx, o.cp.Client, ns, "db", harness.ServicePort{Port: 5432})
	if err != nil {
		t.Fatal(err)
	}
	serveTCPEcho(t, svc.Spec.ClusterIP, 5432)
	if err := o.cp.Client.Create(ctx, &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: tunav1.TCPEndpointSpec{Alias: "db"}}); err != nil {
		t.Fatal(err)
	}
	if err := o.cp.Client.Create(ctx, &tunav1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: tunav1.TunnelSpec{Protocol: tunav1.ProtocolTCP, PortOrAlias: "db",
			Upstream: tunav1.TunnelUpstream{URL: "tcp://db:5432"}}}); err != nil {
		t.Fatal(err)
	}
	var url, last string
	await(t, "the TCP Tunnel Ready with 6 sessions", 30*time.Second, func() bool {
		var tun tunav1.Tunnel
		if err := o.cp.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "db"}, &tun); err != nil {
			last = err.Error()
			return false
		}
		url, last = tun.Status.URL, fmt.Sprintf("url %q, sessions %d", tun.Status.URL, tun.Status.Sessions)
		return tun.Status.Sessions == 6 && meta.IsStatusConditionTrue(tun.Status.Conditions, tunav1.ConditionReady)
	}, func() string { return last })
	_, port, err := net.SplitHostPort(strings.TrimPrefix(url, "tcp://"))
	if err != nil {
		t.Fatalf("status.url %q: %v", url, err)
	}
	for i, n := range o.c.Nodes {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(n.TCPHost, port), 5*time.Second)
		if err != nil {
			t.Fatalf("node %d has no listener on the endpoint's port %s: %v", i, port, err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		line := fmt.Sprintf("through node %d\n", i)
		if _, err := io.WriteString(conn, line); err != nil {
			t.Fatal(err)
		}
		got, err := bufio.NewReader(conn).ReadString('\n')
		_ = conn.Close()
		if err != nil || got != line {
			t.Fatalf("node %d answered %q, %v; want the echo %q", i, got, err, line)
		}
	}
}
