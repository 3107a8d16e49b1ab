//go:build node

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"code.tuna.am/tuna/k8s-operator/tests/node"
	"code.tuna.am/tuna/k8s-operator/tests/node/tuna"
)

// releasePods are the release's pods matching selector that are not
// being deleted.
func releasePods(ctx context.Context, t *testing.T, selector string) []corev1.Pod {
	t.Helper()
	pods, err := env.cluster.Client.CoreV1().Pods(tuna.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// awaitPodsReady waits until every pod of selector is Ready (want) or
// none is (!want).
func awaitPodsReady(ctx context.Context, t *testing.T, selector string, want bool, within time.Duration) {
	t.Helper()
	eventually(ctx, t, within, func() error {
		for _, p := range releasePods(ctx, t, selector) {
			if podReady(p) != want {
				return fmt.Errorf("pod %s Ready=%v, want %v", p.Name, podReady(p), want)
			}
		}
		return nil
	})
}

// TestProbes: readiness follows the edge (the controller's: its API
// answers the key; the agent's: its tunnels hold sessions), liveness does
// not (a restart would not bring the edge back), and a dead listener in a
// pod gets the container restarted.
func TestProbes(t *testing.T) {
	ctx := context.Background()
	url := publishLoadTunnel(ctx, t, "probed")
	awaitPodsReady(ctx, t, agentSelector, true, time.Minute)
	awaitPodsReady(ctx, t, controllerSelector, true, time.Minute)
	restarts := restartCounts(ctx, t)

	// The edge goes (a crashed VPS).
	env.edge.Kill()
	down := time.Now()
	awaitPodsReady(ctx, t, agentSelector, false, 2*time.Minute)
	t.Logf("edge down: the agent pods are not Ready after %v", time.Since(down).Round(time.Millisecond))
	awaitPodsReady(ctx, t, controllerSelector, false, 2*time.Minute)
	t.Logf("edge down: the controller pods are not Ready after %v", time.Since(down).Round(time.Millisecond))
	// Liveness holds through the outage: for longer than its own failure
	// window (5 s delay, 3 failures 10 s apart), no container restarts.
	liveness := 40 * time.Second
	for time.Since(down) < liveness {
		if got := restartCounts(ctx, t); fmt.Sprint(got) != fmt.Sprint(restarts) {
			t.Fatalf("containers restarted while the edge was down: %v, before %v", got, restarts)
		}
		time.Sleep(time.Second)
	}
	if err := env.edge.Start(ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	awaitPodsReady(ctx, t, agentSelector, true, 2*time.Minute)
	awaitPodsReady(ctx, t, controllerSelector, true, 2*time.Minute)
	t.Logf("edge back: every pod Ready after %v", time.Since(back).Round(time.Millisecond))
	awaitServed(ctx, t, url, "probed")

	// A dead listener: the agent's probe port, shut down under the
	// running process. The container is restarted.
	pod := releasePods(ctx, t, agentSelector)[0]
	before := pod.Status.ContainerStatuses[0].RestartCount
	pids, err := env.cluster.ContainerProcesses(pod.Status.ContainerStatuses[0].ContainerID)
	if err != nil || len(pids) == 0 {
		t.Fatalf("the agent's processes: %v %v", pids, err)
	}
	if err := node.KillListener(pids[0], 8081); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	eventually(ctx, t, 2*time.Minute, func() error {
		p, err := env.cluster.Client.CoreV1().Pods(tuna.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.RestartCount == before || !podReady(*p) {
			return fmt.Errorf("agent %s: %d restarts, Ready=%v", p.Name, cs.RestartCount, podReady(*p))
		}
		if term := cs.LastTerminationState.Terminated; term != nil {
			t.Logf("agent %s with a dead probe listener: restarted (exit %d, %s) and Ready after %v", p.Name, term.ExitCode, term.Reason, time.Since(killed).Round(time.Millisecond))
		}
		return nil
	})
	awaitServed(ctx, t, url, "probed")
}
