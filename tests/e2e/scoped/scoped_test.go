// Package scoped runs the operator limited to listed namespaces
// (--watch-namespaces, chart: watchNamespaces), as the chart's
// ServiceAccounts with the Roles the chart renders for that list. The
// option is component-wide, so the package has its own control plane, edge
// and operator.
package scoped

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/suite"
)

// listed is the one namespace the operator watches; unlisted exists but is
// not in the list.
const (
	listed   = "team-a"
	unlisted = "team-b"
	wait     = 30 * time.Second
)

var (
	env  suite.Env
	cp   *harness.ControlPlane
	edge *harness.Edge
	ids  *harness.Identities
)

func TestMain(m *testing.M) {
	scope := func(c *app.Common) { c.WatchNamespaces = []string{listed} }
	suite.Main(m, &env, suite.Options{
		Name: "scoped e2e",
		// The chart's Roles go into the listed namespaces: they exist
		// first, as an install needs.
		Namespaces: []string{listed, unlisted},
		Edge: func(*suite.Env) (harness.EdgeOptions, error) {
			return harness.EdgeOptions{KeepaliveInterval: time.Second, KeepaliveTimeout: 3 * time.Second}, nil
		},
		Values:     map[string]any{"watchNamespaces": []any{listed}},
		Controller: []func(*app.ControllerOptions){func(o *app.ControllerOptions) { scope(&o.Common) }},
		Agent:      []func(*app.AgentOptions){func(o *app.AgentOptions) { scope(&o.Common) }},
		Start: func(e *suite.Env) (func(), error) {
			cp, edge, ids = e.CP, e.Edge, e.IDs
			return nil, nil
		},
	})
}

func as(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: app.Scheme()})
	require.NoError(t, err)
	return c
}

// The agent, the component that faces the internet, can get Secrets in
// the listed namespace and its own (the key Secrets), and nowhere else.
func TestAgentReadsSecretsOnlyInListedNamespaces(t *testing.T) {
	ctx := context.Background()
	agent, controller := as(t, ids.Agent), as(t, ids.Controller)
	probe := nameForRun(t, "probe")
	for _, ns := range []string{listed, unlisted, harness.OperatorNamespace} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: probe}, StringData: map[string]string{"k": "v"}}
		require.NoError(t, cp.Client.Create(ctx, s))
	}
	svc, err := harness.CreateService(ctx, cp.Client, unlisted, probe, harness.ServicePort{Port: 8080})
	require.NoError(t, err)
	var s corev1.Secret
	assert.NoError(t, agent.Get(ctx, types.NamespacedName{Namespace: listed, Name: probe}, &s), "the agent gets Secrets in a listed namespace")
	assert.NoError(t, agent.Get(ctx, types.NamespacedName{Namespace: harness.OperatorNamespace, Name: probe}, &s), "the agent gets the key Secrets in its own namespace")

	forbidden := func(err error, what string) {
		t.Helper()
		assert.True(t, apierrors.IsForbidden(err), "%s must be forbidden, got %v", what, err)
	}
	forbidden(agent.Get(ctx, types.NamespacedName{Namespace: unlisted, Name: probe}, &corev1.Secret{}), "agent get a Secret in an unlisted namespace")
	forbidden(agent.Get(ctx, client.ObjectKeyFromObject(svc), &corev1.Service{}), "agent get a Service in an unlisted namespace")
	forbidden(agent.List(ctx, &tunav1.TunnelList{}), "agent list Tunnels cluster-wide")
	forbidden(agent.List(ctx, &tunav1.TunnelList{}, client.InNamespace(unlisted)), "agent list Tunnels in an unlisted namespace")
	assert.NoError(t, agent.List(ctx, &tunav1.TunnelList{}, client.InNamespace(listed)), "the agent lists Tunnels in a listed namespace")
	forbidden(controller.List(ctx, &tunav1.TunnelList{}, client.InNamespace(unlisted)), "controller list Tunnels in an unlisted namespace")
	// With secretSync on (as here), the controller gets Secrets by name in
	// the listed namespace only, and lists them nowhere.
	assert.NoError(t, controller.Get(ctx, types.NamespacedName{Namespace: listed, Name: probe}, &corev1.Secret{}), "secretSync: the controller gets a Secret in a listed namespace")
	forbidden(controller.Get(ctx, types.NamespacedName{Namespace: unlisted, Name: probe}, &corev1.Secret{}), "controller get a Secret in an unlisted namespace")
	forbidden(controller.List(ctx, &corev1.SecretList{}, client.InNamespace(listed)), "controller list Secrets")
}

// A SecretSync in the listed namespace syncs, with the chart's Roles; one
// in an unlisted namespace is left alone.
func TestSecretSyncOnlyInListedNamespaces(t *testing.T) {
	ctx := context.Background()
	admin := edge.Client(edge.AdminKey)
	db := nameForRun(t, "db")
	for _, ns := range []string{listed, unlisted} {
		_, err := admin.PutSecret(ctx, ns+"/"+db, apiwire.PutSecret{Data: map[string][]byte{"password": []byte("pw-" + ns)}})
		require.NoError(t, err)
		ss := &tunav1.SecretSync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: db},
			Spec: tunav1.SecretSyncSpec{Source: tunav1.SecretSyncSource{Name: ns + "/" + db}}}
		require.NoError(t, cp.Client.Create(ctx, ss))
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var s corev1.Secret
		require.NoError(c, cp.Client.Get(ctx, types.NamespacedName{Namespace: listed, Name: db}, &s))
		assert.Equal(c, "pw-"+listed, string(s.Data["password"]))
	}, wait, 50*time.Millisecond)
	var ignored tunav1.SecretSync
	require.NoError(t, cp.Client.Get(ctx, types.NamespacedName{Namespace: unlisted, Name: db}, &ignored))
	assert.Empty(t, ignored.Finalizers, "the controller put a finalizer on a SecretSync of an unlisted namespace")
	assert.Empty(t, ignored.Status.Conditions)
	err := cp.Client.Get(ctx, types.NamespacedName{Namespace: unlisted, Name: db}, &corev1.Secret{})
	assert.True(t, apierrors.IsNotFound(err), "a Secret was written in an unlisted namespace: %v", err)
}

// runs counts the runs of each test in this process: the namespaces are
// fixed, so a test takes names of its own per run and repeats under -count.
var runs = map[string]int{}

func nameForRun(t *testing.T, base string) string {
	runs[t.Name()+"/"+base]++
	return fmt.Sprintf("%s%d", base, runs[t.Name()+"/"+base])
}

// A Tunnel in the listed namespace is published end to end; one in an
// unlisted namespace is left alone: no finalizer, no status, no key on the
// edge, and its host is not served.
func TestOnlyListedNamespacesAreServed(t *testing.T) {
	ctx := context.Background()
	name := nameForRun(t, "web")
	for _, ns := range []string{listed, unlisted} {
		svc, err := harness.CreateService(ctx, cp.Client, ns, name, harness.ServicePort{Port: 8080})
		require.NoError(t, err)
		b, err := harness.ServeEcho("web-"+ns, svc.Spec.ClusterIP, 8080)
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
	}
	// The unlisted Tunnel goes first: a component that watched its
	// namespace would meet it before the listed one, so once the listed one
	// is served, the unlisted one would have been handled too.
	ignored := httpTunnel(unlisted, name, "scoped-ignored-"+name)
	require.NoError(t, cp.Client.Create(ctx, ignored))
	require.NoError(t, cp.Client.Create(ctx, httpTunnel(listed, name, "scoped-served-"+name)))

	var served tunav1.Tunnel
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, cp.Client.Get(ctx, types.NamespacedName{Namespace: listed, Name: name}, &served))
		cond := status.Find(served.Status.Conditions, tunav1.ConditionReady)
		require.NotNil(c, cond, "no Ready condition yet")
		assert.Equal(c, metav1.ConditionTrue, cond.Status, "%s: %s", cond.Reason, cond.Message)
	}, wait, 50*time.Millisecond)
	code, body := get(t, served.Status.URL)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var echo harness.Echo
	require.NoError(t, json.Unmarshal(body, &echo), "%s", body)
	assert.Equal(t, "web-"+listed, echo.Backend)

	var got tunav1.Tunnel
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(ignored), &got))
	assert.Empty(t, got.Finalizers, "the controller put a finalizer on a Tunnel of an unlisted namespace")
	assert.Empty(t, got.Status.Conditions, "a component wrote the status of a Tunnel of an unlisted namespace")
	keys, err := edge.Client(edge.AdminKey).ListTunnelKeys(ctx, map[string]string{edgeapi.LabelNamespace: unlisted})
	require.NoError(t, err)
	assert.Empty(t, keys, "the controller issued a key for a Tunnel of an unlisted namespace")
	code, body = get(t, "http://scoped-ignored-"+name+"."+harness.BaseDomain+"/")
	assert.Equal(t, http.StatusNotFound, code, "the unlisted Tunnel's host must not be served: %s", body)
}

func httpTunnel(ns, name, subdomain string) *tunav1.Tunnel {
	return &tunav1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: tunav1.TunnelSpec{Protocol: tunav1.ProtocolHTTP, Subdomain: subdomain, Upstream: tunav1.TunnelUpstream{URL: "http://" + name + ":8080"}}}
}

// get fetches url through the edge's public listener, whatever its host.
func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, edge.HTTPAddr())
		}}}
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}
