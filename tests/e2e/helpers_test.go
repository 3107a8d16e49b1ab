package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/suite"
)

const wait = 30 * time.Second

// namespace creates a fresh namespace for one test.
func namespace(t *testing.T) string {
	t.Helper()
	return env.Namespace(t, "e2e", t.Name())
}

// echoService creates a Service and an echo backend on its ClusterIP for
// each port; backend names are "<service>-<port>".
func echoService(t *testing.T, ns, name string, ports ...harness.ServicePort) {
	t.Helper()
	svc, err := harness.CreateService(context.Background(), env.CP.Client, ns, name, ports...)
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
	return env.WaitReady(t, key, want, reason)
}

// publicClient sends requests to the edge's public HTTP listener whatever
// the URL's host, as DNS for *.tuna.localhost would.
func publicClient() *http.Client { return publicClientFrom(netip.Addr{}) }

// publicClientFrom is publicClient with connections from the loopback
// address from (any, when zero).
func publicClientFrom(from netip.Addr) *http.Client {
	addr := env.Edge.HTTPAddr()
	dialer := &net.Dialer{}
	if from.IsValid() {
		dialer.LocalAddr = &net.TCPAddr{IP: from.AsSlice()}
	}
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return dialer.DialContext(ctx, network, addr)
			},
			DisableKeepAlives: true,
		},
	}
}

// clientAddrs gives each test a client address of its own, from
// 127.1.0.0/16 (all of 127.0.0.0/8 reaches the loopback interface; the
// Services' ClusterIPs are 127.10.0.0/16 and up). The edge keeps state
// per client address across all hosts (the wrong basic auth passwords,
// the rate limits per client IP): tests sharing one address would spend
// one budget, and a test run again with -count would find the budget its
// previous run spent.
var clientAddrs struct {
	sync.Mutex
	issued int
	of     map[*testing.T]netip.Addr
}

// clientAddr is the address t's requests through get come from.
func clientAddr(t *testing.T) netip.Addr {
	clientAddrs.Lock()
	defer clientAddrs.Unlock()
	if a, ok := clientAddrs.of[t]; ok {
		return a
	}
	if clientAddrs.of == nil {
		clientAddrs.of = map[*testing.T]netip.Addr{}
	}
	clientAddrs.issued++
	n := clientAddrs.issued % (1 << 16)
	a := netip.AddrFrom4([4]byte{127, 1, byte(n >> 8), byte(n)})
	clientAddrs.of[t] = a
	t.Cleanup(func() {
		clientAddrs.Lock()
		defer clientAddrs.Unlock()
		delete(clientAddrs.of, t)
	})
	return a
}

// get fetches url through the edge, from t's own client address, and
// returns the status and body.
func get(t *testing.T, url string, header ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := publicClientFrom(clientAddr(t)).Do(req)
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
	env.DeleteAndWait(t, obj, k)
}

// waitGoneIn waits until the object k of control plane cp is gone: its
// finalizers ran.
func waitGoneIn(t *testing.T, cp *harness.ControlPlane, obj client.Object, k types.NamespacedName) {
	t.Helper()
	suite.WaitGone(t, cp, wait, obj, k)
}

// waitCondition waits until get() returns an object whose Ready condition
// has the given status and reason, and returns the condition.
func waitCondition(t *testing.T, obj client.Object, k types.NamespacedName, conds func() []metav1.Condition, want metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	return env.WaitCondition(t, obj, k, conds, want, reason)
}

// waitConditionIn is waitCondition on the control plane cp.
func waitConditionIn(t *testing.T, cp *harness.ControlPlane, obj client.Object, k types.NamespacedName, conds func() []metav1.Condition,
	want metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	return suite.WaitCondition(t, cp, wait, obj, k, conds, want, reason)
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
		if err := env.CP.Client.Get(context.Background(), k, obj); err != nil {
			return err
		}
		change(obj)
		return env.CP.Client.Update(context.Background(), obj)
	}))
}

// restartEdge restarts the suite's edge on its state with options o, and
// with its usual options when the test ends.
func restartEdge(t *testing.T, o harness.EdgeOptions) {
	t.Helper()
	normal := env.Edge.Options
	restart := func(o harness.EdgeOptions) {
		t.Helper()
		require.NoError(t, env.Edge.Close())
		edge, err := harness.StartEdge(context.Background(), env.EdgeDir, o)
		require.NoError(t, err)
		env.Edge = edge
	}
	restart(o)
	t.Cleanup(func() { restart(normal) })
}
