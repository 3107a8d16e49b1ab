//go:build node

package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/tests/node/tuna"
)

// loadClients is how many clients send requests at once in the load tests.
const loadClients = 8

// agentSelector and controllerSelector pick the chart's pods.
const (
	agentSelector      = "app.kubernetes.io/component=agent"
	controllerSelector = "app.kubernetes.io/component=controller"
)

// publishLoadTunnel deploys a backend and a Tunnel for it and waits until
// the Tunnel serves.
func publishLoadTunnel(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	deployBackend(ctx, t, name, 1)
	tun := &tunav1.Tunnel{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: appNamespace},
		Spec: tunav1.TunnelSpec{Protocol: tunav1.ProtocolHTTP, Subdomain: name,
			Upstream: tunav1.TunnelUpstream{URL: "http://" + name + ":8080"}},
	}
	if err := env.client.Create(ctx, tun); err != nil {
		t.Fatal(err)
	}
	url := hostURL(name, "/")
	awaitServed(ctx, t, url, name)
	return url
}

// TestHelmUpgradeUnderLoad upgrades the release to a new image tag with
// `helm upgrade` while requests of every method flow through a Tunnel:
// the chart's surge (a new agent pod before an old one goes), preStop
// wait, PodDisruptionBudget and the agents' drain carry them.
func TestHelmUpgradeUnderLoad(t *testing.T) {
	ctx := context.Background()
	url := publishLoadTunnel(ctx, t, "rolling")
	second, err := tuna.BuildImages(ctx, env.dir, secondTag)
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Import(ctx, env.cluster); err != nil {
		t.Fatal(err)
	}
	old := podNames(ctx, t, agentSelector)
	// The old pods' logs go with them: keep them with the suite's.
	for name := range old {
		followLogs(ctx, t, name)
	}

	l := startLoad(url, loadClients)
	eventually(ctx, t, time.Minute, func() error {
		if n := l.succeeded(); n < 200 {
			return fmt.Errorf("%d requests served before the upgrade, want 200", n)
		}
		return nil
	})
	begin := time.Now()
	if err := env.release.Upgrade(ctx, second); err != nil {
		l.stop()
		t.Fatal(err)
	}
	helmTook := time.Since(begin)
	// The old agent pods drain after helm returns: keep the load until
	// they are gone.
	eventually(ctx, t, 3*time.Minute, func() error {
		pods, err := env.cluster.Client.CoreV1().Pods(tuna.Namespace).List(ctx, metav1.ListOptions{LabelSelector: agentSelector})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if old[p.Name] {
				return fmt.Errorf("old agent pod %s still there (%s)", p.Name, p.Status.Phase)
			}
			if img := p.Spec.Containers[0].Image; !strings.HasSuffix(img, ":"+secondTag) {
				return fmt.Errorf("agent pod %s runs %s", p.Name, img)
			}
		}
		return nil
	})
	rolled := time.Since(begin)
	// A few more seconds of load on the new pods only.
	after := l.succeeded()
	eventually(ctx, t, time.Minute, func() error {
		if n := l.succeeded(); n < after+100 {
			return fmt.Errorf("%d requests served after the rollout, want 100", n-after)
		}
		return nil
	})
	r := l.stop()
	t.Logf("helm upgrade --wait took %v, old agent pods gone after %v; %s", helmTook.Round(time.Millisecond), rolled.Round(time.Millisecond), r)
	for _, f := range first(r.Failures, 20) {
		t.Logf("failed: %s", f)
	}
	_, dups, err := get(ctx, publicClient(), strings.TrimSuffix(url, "/")+"/dups")
	if err != nil {
		t.Fatal(err)
	}
	// No request of any method is served twice.
	if len(r.SeenTwice) > 0 || strings.TrimSpace(dups) != "" {
		t.Errorf("during the rolling upgrade %d requests were served twice (backend: %q); want none", len(r.SeenTwice), dups)
	}
	// No request fails: the new pods are Ready once they serve every
	// tunnel, and an old agent's session leaves its pools only once
	// another serves each address.
	if len(r.Failures) > 0 {
		t.Errorf("during the rolling upgrade %d requests failed; want none", len(r.Failures))
	}
	checkNewPodsReady(ctx, t)
}

func checkNewPodsReady(ctx context.Context, t *testing.T) {
	t.Helper()
	for _, sel := range []string{agentSelector, controllerSelector} {
		pods, err := env.cluster.Client.CoreV1().Pods(tuna.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			for _, cs := range p.Status.ContainerStatuses {
				if !cs.Ready || cs.RestartCount != 0 {
					t.Errorf("pod %s: container %s ready=%v restarts=%d", p.Name, cs.Name, cs.Ready, cs.RestartCount)
				}
			}
		}
	}
}

// podNames are the names of the release's pods matching selector.
func podNames(ctx context.Context, t *testing.T, selector string) map[string]bool {
	t.Helper()
	pods, err := env.cluster.Client.CoreV1().Pods(tuna.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out[p.Name] = true
		}
	}
	return out
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// followLogs copies a pod's log, as it is written, to a file of the
// suite's folder (kept when a test fails), since the kubelet removes it
// with the pod.
func followLogs(ctx context.Context, t *testing.T, pod string) {
	t.Helper()
	f, err := os.Create(filepath.Join(env.dir, "pod-"+pod+".log"))
	if err != nil {
		t.Fatal(err)
	}
	stream, err := env.cluster.Client.CoreV1().Pods(tuna.Namespace).GetLogs(pod, &corev1.PodLogOptions{Follow: true}).Stream(ctx)
	if err != nil {
		_ = f.Close()
		t.Fatal(err)
	}
	go func() {
		_, _ = io.Copy(f, stream)
		_ = stream.Close()
		_ = f.Close()
	}()
}
