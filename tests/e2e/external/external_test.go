// Package external runs the operator with external upstreams allowed
// (--allow-external-upstreams, chart: agentManager.allowExternalUpstreams):
// a component-wide switch, so it gets its own control plane and operator.
package external

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/suite"
)

var (
	env  suite.Env
	cp   *harness.ControlPlane
	edge *harness.Edge
)

func TestMain(m *testing.M) {
	allow := func(c *app.Common) { c.AllowExternalUpstreams = true }
	suite.Main(m, &env, suite.Options{
		Name:       "external e2e",
		AsAdmin:    true,
		Controller: []func(*app.ControllerOptions){func(o *app.ControllerOptions) { allow(&o.Common) }},
		Agent:      []func(*app.AgentOptions){func(o *app.AgentOptions) { allow(&o.Common) }},
		Start: func(e *suite.Env) (func(), error) {
			cp, edge = e.CP, e.Edge
			return nil, nil
		},
	})
}

// With external upstreams allowed, an IP address, a Service of another
// namespace and an ExternalName Service are all published.
func TestExternalUpstreamsAllowed(t *testing.T) {
	ctx := context.Background()
	require.NoError(t, cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}))
	require.NoError(t, cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}))
	svc, err := harness.CreateService(ctx, cp.Client, "other", "db", harness.ServicePort{Port: 8080})
	require.NoError(t, err)
	backend, err := harness.ServeEcho("db", svc.Spec.ClusterIP, 8080)
	require.NoError(t, err)
	defer backend.Close()
	ext := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "ext"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: svc.Spec.ClusterIP}}
	require.NoError(t, cp.Client.Create(ctx, ext))

	for name, url := range map[string]string{
		"ip":           "http://" + svc.Spec.ClusterIP + ":8080",
		"other-ns":     "http://db.other.svc.cluster.local:8080",
		"externalname": "http://ext:8080",
	} {
		t.Run(name, func(t *testing.T) {
			tun := &tunav1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name},
				Spec: tunav1.TunnelSpec{Protocol: tunav1.ProtocolHTTP, Subdomain: "ext-" + name, Upstream: tunav1.TunnelUpstream{URL: url}}}
			require.NoError(t, cp.Client.Create(ctx, tun))
			var got tunav1.Tunnel
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				require.NoError(c, cp.Client.Get(ctx, types.NamespacedName{Namespace: "apps", Name: name}, &got))
				cond := status.Find(got.Status.Conditions, tunav1.ConditionReady)
				require.NotNil(c, cond)
				assert.Equal(c, metav1.ConditionTrue, cond.Status, "%s: %s", cond.Reason, cond.Message)
			}, 30*time.Second, 50*time.Millisecond)
			body := fetch(t, got.Status.URL)
			assert.Contains(t, body, `"backend":"db"`)
		})
	}
}

func fetch(t *testing.T, url string) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, edge.HTTPAddr())
		}}}
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	return strings.TrimSpace(string(b))
}
