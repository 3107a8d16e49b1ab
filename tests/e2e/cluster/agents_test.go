package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// operatorOnCluster is the real operator on a real apiserver against an
// edge cluster: the controller talks to node 0's API, two agent replicas
// serve one Tunnel of a Service whose echo backend listens on its
// ClusterIP.
type operatorOnCluster struct {
	cp  *harness.ControlPlane
	c   *harness.EdgeCluster
	tun types.NamespacedName
}

func startOperatorOnCluster(t *testing.T, nodes int) *operatorOnCluster {
	t.Helper()
	ctx := context.Background()
	harness.UseTestLogger()
	cp, err := harness.StartControlPlane()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	if _, err := cp.Namespace(ctx, harness.OperatorNamespace); err != nil {
		t.Fatal(err)
	}
	ids, err := cp.ChartIdentities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := harness.StartEdgeCluster(t.TempDir(), nodes, harness.EdgeClusterOptions{
		KeepaliveInterval: 500 * time.Millisecond, KeepaliveTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctrl := harness.StartClusterController(ids.Controller, c, 0)
	t.Cleanup(func() { _ = ctrl.Stop() })
	for _, name := range []string{"agent-0", "agent-1"} {
		a := harness.StartAgent(ids.Agent, func(o *app.AgentOptions) { o.Replica, o.Replicas = name, 2 })
		t.Cleanup(func() { _ = a.Stop() })
	}
	ns, err := cp.Namespace(ctx, "cluster-agents")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := harness.CreateService(ctx, cp.Client, ns, "web", harness.ServicePort{Port: 8080})
	if err != nil {
		t.Fatal(err)
	}
	b, err := harness.ServeEcho("web", svc.Spec.ClusterIP, 8080)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	tun := &tunav1.Tunnel{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Spec: tunav1.TunnelSpec{Protocol: tunav1.ProtocolHTTP, Subdomain: "app",
			Upstream: tunav1.TunnelUpstream{URL: "http://web:8080"}},
	}
	if err := cp.Client.Create(ctx, tun); err != nil {
		t.Fatal(err)
	}
	return &operatorOnCluster{cp: cp, c: c, tun: types.NamespacedName{Namespace: ns, Name: "app"}}
}

// sessions waits until the Tunnel is Ready with want sessions (two
// replicas, one per live node each) in its merged status and in each
// replica's entry.
func (o *operatorOnCluster) sessions(t *testing.T, want int32) {
	t.Helper()
	var last string
	await(t, fmt.Sprintf("Ready with %d sessions", want), 30*time.Second, func() bool {
		var tun tunav1.Tunnel
		if err := o.cp.Client.Get(context.Background(), o.tun, &tun); err != nil {
			last = err.Error()
			return false
		}
		per := []string{}
		ok := tun.Status.Sessions == want && meta.IsStatusConditionTrue(tun.Status.Conditions, tunav1.ConditionReady)
		for _, e := range tun.Status.Agents {
			per = append(per, fmt.Sprintf("%s=%d", e.Name, e.Sessions))
			ok = ok && e.Connected && max(e.Sessions, 1) == want/2
		}
		last = fmt.Sprintf("sessions %d, agents %v", tun.Status.Sessions, per)
		return ok && len(tun.Status.Agents) == 2
	}, func() string { return last })
}

// echoed is the echo backend's answer to a request through any node.
func echoed(_ *harness.EdgeNode, body string) bool {
	return strings.Contains(body, `"backend":"web"`)
}

// Two agent replicas hold a session to every live node of the edge, so
// every node serves the Tunnel, and follow the node set with no operator
// action: a node that drains is dropped, a killed one costs only its own
// requests, a restarted or joining one is served again within seconds.
func TestAgentsServeThroughEveryNode(t *testing.T) {
	o := startOperatorOnCluster(t, 3)
	c := o.c
	o.sessions(t, 6)
	l := startLoad(c, echoed)
	defer func() { l.end() }()
	await(t, "200s through every node", 30*time.Second, func() bool {
		ok, _ := l.snapshot()
		return ok[0] > 20 && ok[1] > 20 && ok[2] > 20
	}, l.String)
	if _, failed := l.snapshot(); failed[0]+failed[1]+failed[2] != 0 {
		t.Fatalf("requests failed with every node up: %v", failed)
	}

	t.Run("a draining node is dropped and the others answer every request", func(t *testing.T) {
		okBefore, failedBefore := l.snapshot()
		c.Stop(2)
		o.sessions(t, 4)
		await(t, "the others serving after the drain", 10*time.Second, func() bool {
			ok, _ := l.snapshot()
			return ok[0] > okBefore[0]+50 && ok[1] > okBefore[1]+50
		})
		if _, failed := l.snapshot(); failed[0] != failedBefore[0] || failed[1] != failedBefore[1] {
			t.Fatalf("requests through the live nodes failed: before %v, after %v", failedBefore, failed)
		}
	})

	t.Run("the drained node restarted is served again", func(t *testing.T) {
		if err := c.Start(2); err != nil {
			t.Fatal(err)
		}
		o.sessions(t, 6)
		ok, _ := l.snapshot()
		await(t, "200s through the restarted node", 10*time.Second, func() bool {
			now, _ := l.snapshot()
			return now[2] > ok[2]+20
		})
	})

	t.Run("a node killed under load costs only its own requests", func(t *testing.T) {
		okBefore, failedBefore := l.snapshot()
		c.Kill(1)
		await(t, "the others serving after the kill", 10*time.Second, func() bool {
			ok, _ := l.snapshot()
			return ok[0] > okBefore[0]+50 && ok[2] > okBefore[2]+50
		})
		o.sessions(t, 4)
		_, failed := l.snapshot()
		if failed[0] != failedBefore[0] || failed[2] != failedBefore[2] {
			t.Fatalf("requests through the live nodes failed: before %v, after %v", failedBefore, failed)
		}
		if failed[1] == failedBefore[1] {
			t.Fatal("no request through the killed node failed: was it killed?")
		}
		if err := c.Start(1); err != nil {
			t.Fatal(err)
		}
		o.sessions(t, 6)
		ok, _ := l.snapshot()
		await(t, "200s through the restarted node", 10*time.Second, func() bool {
			now, _ := l.snapshot()
			return now[1] > ok[1]+20
		})
	})

	t.Run("a joining node is served with no operator action", func(t *testing.T) {
		l.end()
		i, err := c.AddNode()
		if err != nil {
			t.Fatal(err)
		}
		o.sessions(t, 8)
		l = startLoad(c, echoed)
		await(t, "200s through the new node", 10*time.Second, func() bool {
			ok, _ := l.snapshot()
			return ok[i] > 20 && ok[0] > 20
		})
		if _, failed := l.snapshot(); failed[0]+failed[1]+failed[2]+failed[3] != 0 {
			t.Fatalf("requests failed with four nodes up: %v", failed)
		}
	})

	t.Run("one etcd member down changes nothing; without quorum writes are refused and the Tunnel serves", func(t *testing.T) {
		c.Etcd.Stop(2)
		everyNodeServes(t, l, "with one etcd member down")
		o.sessions(t, 8)
		c.Etcd.Stop(1)
		_, err := c.Client(0, c.OperatorKey).CreateDomain(context.Background(), apiwire.CreateDomain{Subdomain: "no-quorum"})
		var ae *apiwire.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || ae.Code != apiwire.CodeStateUnavailable {
			t.Fatalf("write without quorum: %v, want 503 state_unavailable", err)
		}
		everyNodeServes(t, l, "without quorum")
		o.sessions(t, 8)
		for _, i := range []int{1, 2} {
			if err := c.Etcd.Restart(i); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Etcd.WaitHealthy(time.Minute); err != nil {
			t.Fatal(err)
		}
	})
	if l.wrong.Load() != 0 {
		t.Fatalf("%d requests got another answer than the backend's", l.wrong.Load())
	}
}

// everyNodeServes waits until every node answered 20 more requests and
// fails if any request failed meanwhile.
func everyNodeServes(t *testing.T, l *load, when string) {
	t.Helper()
	ok, failedBefore := l.snapshot()
	await(t, "requests through every node "+when, 10*time.Second, func() bool {
		now, _ := l.snapshot()
		for i := range now {
			if now[i] <= ok[i]+20 {
				return false
			}
		}
		return true
	}, l.String)
	if _, failed := l.snapshot(); !slices.Equal(failed, failedBefore) {
		t.Fatalf("requests failed %s: %v → %v", when, failedBefore, failed)
	}
}
