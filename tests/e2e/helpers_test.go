package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

const wait = 30 * time.Second

var nsCounter atomic.Int32

// namespace creates a fresh namespace for one test.
func namespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("e2e-%d-%s", nsCounter.Add(1), strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-")
	_, err := env.cp.Namespace(context.Background(), name)
	require.NoError(t, err)
	return name
}

// echoService creates a Service and an echo backend on its ClusterIP for
// each port; backend names are "<service>-<port>".
func echoService(t *testing.T, ns, name string, ports ...harness.ServicePort) {
	t.Helper()
	svc, err := harness.CreateService(context.Background(), env.cp.Client, ns, name, ports...)
	require.NoError(t, err)
	for _, p := range svc.Spec.Ports {
		b, err := harness.ServeEcho(fmt.Sprintf("%s-%d", name, p.Port), svc.Spec.ClusterIP, p.Port)
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
	}
}

func httpTunnel(ns, name, subdomain, upstream string) *tunav1.Tunnel {
	return &tunav1.Tunnel{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: tunav1.TunnelSpec{
			Protocol: tunav1.ProtocolHTTP, Subdomain: subdomain,
			Upstream: tunav1.TunnelUpstream{URL: upstream},
		},
	}
}

// waitReady waits until the Tunnel's Ready condition has the given status
// and reason, and returns the Tunnel.
func waitReady(t *testing.T, key types.NamespacedName, want metav1.ConditionStatus, reason string) *tunav1.Tunnel {
	t.Helper()
	var tun tunav1.Tunnel
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.cp.Client.Get(context.Background(), key, &tun))
		cond := status.Find(tun.Status.Conditions, tunav1.ConditionReady)
		require.NotNil(c, cond, "no Ready condition yet")
		require.Equal(c, []any{want, reason, tun.Generation}, []any{cond.Status, cond.Reason, cond.ObservedGeneration},
			"Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
	}, wait, 50*time.Millisecond, "Tunnel %s never became Ready=%s %s", key, want, reason)
	return &tun
}

// publicClient sends requests to the edge's public HTTP listener whatever
// the URL's host, as DNS for *.tuna.localhost would.
func publicClient() *http.Client {
	addr := env.edge.HTTPAddr()
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			},
			DisableKeepAlives: true,
		},
	}
}

// get fetches url through the edge and returns the status and body.
func get(t *testing.T, url string, header ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := publicClient().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, body
}

// getEcho fetches url and decodes the echo backend's answer.
func getEcho(t *testing.T, url string, header ...string) harness.Echo {
	t.Helper()
	code, body := get(t, url, header...)
	require.Equal(t, http.StatusOK, code, "body: %s", body)
	var e harness.Echo
	require.NoError(t, json.Unmarshal(body, &e), "body: %s", body)
	return e
}

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// deleteAndWait deletes obj (if present) and waits until its finalizers ran.
func deleteAndWait(t *testing.T, obj client.Object, k types.NamespacedName) {
	t.Helper()
	ctx := context.Background()
	if err := env.cp.Client.Get(ctx, k, obj); err != nil {
		return
	}
	require.NoError(t, client.IgnoreNotFound(env.cp.Client.Delete(ctx, obj)))
	waitGoneIn(t, env.cp, obj, k)
}

// waitGoneIn waits until the object k of control plane cp is gone: its
// finalizers ran.
func waitGoneIn(t *testing.T, cp *harness.ControlPlane, obj client.Object, k types.NamespacedName) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := cp.Client.Get(context.Background(), k, obj)
		assert.True(c, apierrors.IsNotFound(err), "%s %s still exists: %v", obj.GetObjectKind().GroupVersionKind().Kind, k, err)
	}, wait, 50*time.Millisecond)
}

// waitCondition waits until get() returns an object whose Ready condition
// has the given status and reason, and returns the condition.
func waitCondition(t *testing.T, obj client.Object, k types.NamespacedName, conds func() []metav1.Condition, want metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	return waitConditionIn(t, env.cp, obj, k, conds, want, reason)
}

// waitConditionIn is waitCondition on the control plane cp.
func waitConditionIn(t *testing.T, cp *harness.ControlPlane, obj client.Object, k types.NamespacedName, conds func() []metav1.Condition,
	want metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, cp.Client.Get(context.Background(), k, obj))
		cond := status.Find(conds(), tunav1.ConditionReady)
		require.NotNil(c, cond, "no Ready condition yet")
		got = *cond
		assert.Equal(c, []any{want, reason}, []any{cond.Status, cond.Reason}, "Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
	}, wait, 50*time.Millisecond, "%s never became Ready=%s %s", k, want, reason)
	return got
}

// tag is a short token unique to a test namespace ("e42" for
// "e2e-42-testname"), for names that are global on the edge (aliases,
// subdomains) and must be DNS labels.
func tag(ns string) string {
	parts := strings.SplitN(ns, "-", 3)
	return "e" + parts[1]
}

// update reads the latest version of obj into it, applies change and
// writes it, again when a write of the operator's (a finalizer, status)
// came in between: a test must not fail on a conflict the user's kubectl
// edit would simply retry.
func update[T client.Object](t *testing.T, obj T, change func(T)) {
	t.Helper()
	k := client.ObjectKeyFromObject(obj)
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.cp.Client.Get(context.Background(), k, obj); err != nil {
			return err
		}
		change(obj)
		return env.cp.Client.Update(context.Background(), obj)
	}))
}

// restartEdge restarts the suite's edge on its state with options o, and
// with its usual options when the test ends.
func restartEdge(t *testing.T, o harness.EdgeOptions) {
	t.Helper()
	normal := env.edge.Options
	restart := func(o harness.EdgeOptions) {
		t.Helper()
		require.NoError(t, env.edge.Close())
		edge, err := harness.StartEdge(context.Background(), env.edgeDir, o)
		require.NoError(t, err)
		env.edge = edge
	}
	restart(o)
	t.Cleanup(func() { restart(normal) })
}
