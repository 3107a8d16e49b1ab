//go:build node

package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestClusterRunsPodsAndLeavesNothing starts a cluster, runs a pod under
// the restricted Pod Security level, and checks that Stop leaves no
// process, mount, cgroup, link or file behind.
func TestClusterRunsPodsAndLeavesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Progress: testWriter{t}, LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = c.Stop()
		}
	}()
	t.Logf("node cluster %d up in %v", c.Index, c.Started.Round(time.Millisecond))

	if ip := runPod(ctx, t, c); ip == "" {
		t.Fatal("the pod has no IP")
	}
	// What a failed wait prints: the pod, its container and log (read
	// through the apiserver from the kubelet), and the events.
	report := c.Describe(ctx, "restricted")
	for _, want := range []string{"pod sleeper: Running", "container pause: ready=", "restarts=0 state=running since",
		"log, last lines:", "events of restricted:", "Pod/sleeper Scheduled", "node " + NodeName + ":"} {
		if !strings.Contains(report, want) {
			t.Errorf("Describe lacks %q:\n%s", want, report)
		}
	}

	dir, index := c.Dir, c.Index
	sandboxes := sandboxIDs(t, dir)
	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, dir, index, sandboxes)
}

// sandboxIDs are the pod sandboxes of the cluster in dir: each has a CNI
// loopback cache entry until it is removed.
func sandboxIDs(t *testing.T, dir string) []string {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Join(dir, "containerd", "root", "io.containerd.grpc.v1.cri", "sandboxes"))
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.Name())
	}
	if len(ids) == 0 {
		t.Fatal("the cluster has no pod sandbox: the checks of what is left would show nothing")
	}
	return ids
}

// runPod runs a pod in a namespace that enforces the restricted Pod
// Security level and returns its IP once it runs.
func runPod(ctx context.Context, t *testing.T, c *Cluster) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "restricted", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper", Namespace: "restricted"},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "pause", Image: PauseImage, ImagePullPolicy: corev1.PullNever,
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	if _, err := c.Client.CoreV1().Pods("restricted").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		p, err := c.Client.CoreV1().Pods("restricted").Get(ctx, "sleeper", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase == corev1.PodRunning {
			return p.Status.PodIP
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pod not running: %+v", p.Status)
		case <-time.After(200 * time.Millisecond):
		}
	}

}

func assertNothingLeft(t *testing.T, dir string, index int, sandboxes []string) {
	t.Helper()
	if m := mountsUnder(dir); len(m) > 0 {
		t.Errorf("mounts left: %v", m)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s left (%v)", dir, err)
	}
	for _, h := range cgroupHierarchies() {
		if _, err := os.Stat(filepath.Join(h, cgroupName(index))); !os.IsNotExist(err) {
			t.Errorf("cgroup %s left in %s", cgroupName(index), h)
		}
	}
	if _, err := os.Stat("/sys/class/net/" + hostVeth(index)); !os.IsNotExist(err) {
		t.Errorf("link %s left", hostVeth(index))
	}
	links, _ := os.ReadDir(containerLogLinks)
	for _, l := range links {
		if dest, err := os.Readlink(filepath.Join(containerLogLinks, l.Name())); err == nil && strings.HasPrefix(dest, dir+"/") {
			t.Errorf("log link left: %s -> %s", l.Name(), dest)
		}
	}
	if cached, _ := filepath.Glob(filepath.Join(cniResults, networkName(index)+"-*")); len(cached) > 0 {
		t.Errorf("CNI cache entries left: %v", cached)
	}
	for _, sb := range sandboxes {
		if _, err := os.Stat(filepath.Join(cniResults, "cni-loopback-"+sb+"-lo")); err == nil {
			t.Errorf("CNI loopback cache entry of sandbox %s left", sb)
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
