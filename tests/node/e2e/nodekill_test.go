//go:build node

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"code.tuna.am/tuna/k8s-operator/tests/node"
	"code.tuna.am/tuna/k8s-operator/tests/node/tuna"
)

// TestNodeProcessesKilled kills the kubelet, and then containerd, with
// SIGKILL under load, and starts each again: the agent pods run on (their
// runtime shims hold them), so the tunnels keep serving, and neither
// restart restarts a container.
func TestNodeProcessesKilled(t *testing.T) {
	ctx := context.Background()
	url := publishLoadTunnel(ctx, t, "steady")
	restarts := restartCounts(ctx, t)
	l := startLoad(url, 4)
	await := func(more int) {
		t.Helper()
		from := l.succeeded()
		eventually(ctx, t, 2*time.Minute, func() error {
			if n := l.succeeded() - from; n < more {
				return fmt.Errorf("%d requests served, want %d", n, more)
			}
			return nil
		})
	}
	await(100)
	for _, comp := range []string{node.Kubelet, node.Containerd} {
		if err := env.cluster.KillComponent(comp); err != nil {
			t.Fatal(err)
		}
		down := time.Now()
		await(200)
		t.Logf("%s down for %v: requests served meanwhile", comp, time.Since(down).Round(time.Millisecond))
		if err := env.cluster.StartComponent(ctx, comp); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, 2*time.Minute, func() error { return env.cluster.NodeReady(ctx) })
		await(100)
	}
	r := l.stop()
	t.Logf("kubelet and containerd killed and restarted in turn: %s", r)
	for _, f := range first(r.Failures, 20) {
		t.Logf("failed: %s", f)
	}
	if len(r.Failures) > 0 {
		t.Errorf("%d requests failed while node processes were down", len(r.Failures))
	}
	if got := restartCounts(ctx, t); fmt.Sprint(got) != fmt.Sprint(restarts) {
		t.Errorf("containers restarted: %v, before %v", got, restarts)
	}
}

// restartCounts are the release's containers' restart counts by pod.
func restartCounts(ctx context.Context, t *testing.T) map[string]int32 {
	t.Helper()
	pods, err := env.cluster.Client.CoreV1().Pods(tuna.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			out[p.Name] += cs.RestartCount
		}
	}
	return out
}
