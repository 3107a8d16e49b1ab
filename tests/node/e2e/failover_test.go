//go:build node

package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/tests/node/tuna"
)

// controllerLease is the controller's leader election Lease.
const controllerLease = "tuna-controller.k8s.tuna.am"

func leaderLease(ctx context.Context, t *testing.T) *coordinationv1.Lease {
	t.Helper()
	l, err := env.cluster.Client.CoordinationV1().Leases(tuna.Namespace).Get(ctx, controllerLease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// awaitNewLeader waits until a controller other than old holds the lease
// and returns how long that took from since.
func awaitNewLeader(ctx context.Context, t *testing.T, old string, since time.Time) (string, time.Duration) {
	t.Helper()
	var h string
	eventually(ctx, t, time.Minute, func() error {
		h = holder(leaderLease(ctx, t))
		if h == "" || h == old {
			return fmt.Errorf("the lease is still held by %q", h)
		}
		return nil
	})
	return h, time.Since(since)
}

// TestControllerFailover: the chart runs two controllers, one leader. When
// the leader's pod is deleted the standby takes over at once (the leader
// releases the lease as it stops); when the leader's process is killed
// (SIGKILL, nothing released) within the lease's duration. The new leader
// works: a new Tunnel gets its key and serves.
func TestControllerFailover(t *testing.T) {
	ctx := context.Background()
	awaitDeployment(ctx, t, tuna.Namespace, tuna.ReleaseName+"-tuna-k8s-operator-controller")
	lease := leaderLease(ctx, t)
	old := holder(lease)
	if old == "" {
		t.Fatal("no controller holds the lease")
	}
	duration := time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second

	// An orderly stop: the pod is deleted (SIGTERM after preStop).
	pod := strings.SplitN(old, "_", 2)[0]
	begin := time.Now()
	if err := env.cluster.Client.CoreV1().Pods(tuna.Namespace).Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	next, took := awaitNewLeader(ctx, t, old, begin)
	t.Logf("leader pod %s deleted: %s leads after %v", pod, next, took.Round(time.Millisecond))
	// "At once": well within the lease's duration, which a leader that
	// did not release the lease would cost.
	if took >= duration/2 {
		t.Errorf("after an orderly stop the standby took the lease in %v; the chart promises at once (the lease is released), not the %v of an expiry", took, duration)
	}

	// A crash: the leader's process is killed; the lease expires.
	awaitDeployment(ctx, t, tuna.Namespace, tuna.ReleaseName+"-tuna-k8s-operator-controller")
	pod = strings.SplitN(next, "_", 2)[0]
	p, err := env.cluster.Client.CoreV1().Pods(tuna.Namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pids, err := env.cluster.ContainerProcesses(p.Status.ContainerStatuses[0].ContainerID)
	if err != nil || len(pids) == 0 {
		t.Fatalf("the leader's processes: %v %v", pids, err)
	}
	begin = time.Now()
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	last, took := awaitNewLeader(ctx, t, next, begin)
	t.Logf("leader %s killed: %s leads after %v (lease duration %v)", pod, last, took.Round(time.Millisecond), duration)
	// The lease expires at most its duration after the leader's last
	// renewal (before the kill); the candidates try every RetryPeriod
	// (the chart's controller.leaderElection.retryPeriod) stretched by
	// client-go's jitter (up to 1.2 times more): at most 4.4 retry periods
	// later (app.LeaderElection.TakeoverBound). One more second for the API
	// calls on two busy cores.
	if bound := duration + app.DefaultLeaderElection.TakeoverBound() - app.DefaultLeaderElection.LeaseDuration + time.Second; took > bound {
		t.Errorf("after the leader was killed a candidate took the lease in %v, beyond the lease's %v, a jittered retry and a second (%v)", took, duration, bound)
	}
	// The new leader issues keys: a new Tunnel serves.
	publishLoadTunnel(ctx, t, "after-failover")
}
