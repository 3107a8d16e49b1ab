//go:build node

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/hack/images"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

func importBackend(ctx context.Context) error {
	built, err := images.Build(ctx, harness.RepoRoot(), images.HostPlatform(), images.Stamps{}, backend)
	if err != nil {
		return err
	}
	ref, err := name.NewTag(backendImage)
	if err != nil {
		return err
	}
	return env.cluster.Import(ctx, map[name.Tag]v1.Image{ref: built[backend.Name]})
}

// restrictedPod is a pod spec that the restricted level admits.
func restrictedPod(containers ...corev1.Container) corev1.PodSpec {
	for i := range containers {
		containers[i].ImagePullPolicy = corev1.PullNever
		containers[i].SecurityContext = &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
	}
	return corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers:                    containers,
		TerminationGracePeriodSeconds: ptr.To[int64](2),
		EnableServiceLinks:            ptr.To(false),
	}
}

// deployBackend runs the echo backend as a Deployment and a ClusterIP
// Service (http 8080, tcp 9000) of that name in appNamespace, and waits
// until it is available.
func deployBackend(ctx context.Context, t *testing.T, name string, replicas int32) {
	t.Helper()
	labels := map[string]string{"app": name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: appNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: restrictedPod(corev1.Container{
					Name: "echo", Image: backendImage,
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "echo", ContainerPort: 9000}},
					ReadinessProbe: &corev1.Probe{
						ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}},
						PeriodSeconds: 1, TimeoutSeconds: 5,
					},
				}),
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: appNamespace},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 8080, TargetPort: intstr.FromString("http")},
				{Name: "echo", Port: 9000, TargetPort: intstr.FromString("echo")},
			},
		},
	}
	cs := env.cluster.Client
	if _, err := cs.AppsV1().Deployments(appNamespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Services(appNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitDeployment(ctx, t, appNamespace, name)
}

// awaitDeployment waits until the Deployment's pods are all updated and
// available; if they do not become so, it fails with what the pods say.
func awaitDeployment(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	err := poll(ctx, 3*time.Minute, func() error {
		d, err := env.cluster.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas != want || d.Status.AvailableReplicas != want || d.Status.Replicas != want {
			return fmt.Errorf("deployment %s/%s: %d updated, %d available, %d in all, want %d", ns, name,
				d.Status.UpdatedReplicas, d.Status.AvailableReplicas, d.Status.Replicas, want)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, env.cluster.Describe(context.Background(), ns))
	}
}

// eventually retries check until it passes or within runs out.
func eventually(ctx context.Context, t *testing.T, within time.Duration, check func() error) {
	t.Helper()
	if err := poll(ctx, within, check); err != nil {
		t.Fatal(err)
	}
}

// poll retries check every 200 ms until it passes, or returns its last
// error once within runs out.
func poll(ctx context.Context, within time.Duration, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("within %v: %w", within, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// publicClient is an HTTP client of the internet: it dials the edge's
// public listener whatever the URL's host (a tunnel's name under the base
// domain), keeping the host for routing.
func publicClient() *http.Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, env.edge.HTTPAddr)
		},
		MaxIdleConnsPerHost: 64,
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// get requests url through the edge and returns the status and body.
func get(ctx context.Context, c *http.Client, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// awaitServed waits until url answers 200 from the backend's pods.
func awaitServed(ctx context.Context, t *testing.T, url, backendName string) string {
	t.Helper()
	c := publicClient()
	var body string
	eventually(ctx, t, 3*time.Minute, func() error {
		code, b, err := get(ctx, c, url)
		if err != nil {
			return err
		}
		if code != http.StatusOK || !strings.HasPrefix(b, backendName+"-") {
			return fmt.Errorf("GET %s: %d %q", url, code, b)
		}
		body = b
		return nil
	})
	return body
}

// hostURL is the public URL of a host name under the edge's base domain.
func hostURL(sub, path string) string {
	_, port, _ := net.SplitHostPort(env.edge.HTTPAddr)
	return "http://" + sub + "." + harnessBaseDomain() + ":" + port + path
}

func harnessBaseDomain() string { return harness.BaseDomain }

func clientKey(o metav1.Object) ctrlclient.ObjectKey {
	return ctrlclient.ObjectKey{Namespace: o.GetNamespace(), Name: o.GetName()}
}

func isTrue(conds []metav1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}
