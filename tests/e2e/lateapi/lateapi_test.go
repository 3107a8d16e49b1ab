// Package lateapi starts the operator on an API server without the
// Gateway API's CRDs, then installs them, as a cluster's admin does after
// the chart: the running controller and agent turn Gateway support on
// without a restart. The CRDs stay installed once there, so the package
// has its own control plane, edge and operator.
package lateapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/cli/pkg/cmd"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/report"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gatewayclass"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/suite"
)

const (
	wait = 60 * time.Second
	// discovery is how often the components look for the CRDs here
	// (the product's default is apiwatch.DefaultInterval).
	discovery = 200 * time.Millisecond
)

var (
	env  suite.Env
	cp   *harness.ControlPlane
	edge *harness.Edge
	// kubeconfig is the test admin's, for the CLI.
	kubeconfig string
)

func TestMain(m *testing.M) {
	suite.Main(m, &env, suite.Options{
		Name: "lateapi e2e",
		Edge: func(*suite.Env) (harness.EdgeOptions, error) {
			return harness.EdgeOptions{KeepaliveInterval: time.Second, KeepaliveTimeout: 3 * time.Second}, nil
		},
		Controller: []func(*app.ControllerOptions){func(o *app.ControllerOptions) { o.APIDiscoveryInterval = discovery }},
		Agent:      []func(*app.AgentOptions){func(o *app.AgentOptions) { o.APIDiscoveryInterval = discovery }},
		Start: func(e *suite.Env) (func(), error) {
			cp, edge = e.CP, e.Edge
			kubeconfig = filepath.Join(e.Dir, "kubeconfig")
			return nil, cp.WriteKubeconfig(kubeconfig)
		},
	})
}

// install installs the Gateway API CRDs of the given kinds (the file
// names' plural resources) from the pinned module.
func install(t *testing.T, resources ...string) {
	t.Helper()
	paths, err := harness.GatewayAPICRDs()
	require.NoError(t, err)
	var want []string
	for _, p := range paths {
		for _, r := range resources {
			if strings.HasSuffix(filepath.Base(p), "_"+r+".yaml") {
				want = append(want, p)
			}
		}
	}
	require.Len(t, want, len(resources))
	_, err = envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: want, ErrorIfPathMissing: true})
	require.NoError(t, err)
}

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

func ptr[T any](v T) *T { return &v }

// The Gateway API installed after the operator started: the GatewayClass
// is accepted, and preflight reads that the running operator serves it; a
// Gateway with an HTTPRoute serves a real request through the edge, and
// TCPRoutes, whose CRD comes later still, are served too. Then the
// controller stops, and preflight no longer claims the class is served.
// (The CRDs and the stopped controller stay: the test runs once per
// process.)
func TestGatewayAPIInstalledAfterStart(t *testing.T) {
	ctx := context.Background()
	install(t, "gatewayclasses", "gateways", "httproutes", "referencegrants")

	gc := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: gatewayclass.ClassName}, Spec: gwv1.GatewayClassSpec{ControllerName: gatewayclass.ControllerName}}
	require.NoError(t, cp.Client.Create(ctx, gc))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, cp.Client.Get(ctx, key("", gatewayclass.ClassName), gc))
		cond := meta.FindStatusCondition(gc.Status.Conditions, "Accepted")
		require.NotNil(c, cond, "the controller has not seen the GatewayClass")
		require.Equal(c, metav1.ConditionTrue, cond.Status)
	}, wait, 50*time.Millisecond, "the GatewayClass was never accepted: the controller did not notice the CRDs")
	served := preflightServed(t)
	assert.Equal(t, report.Success, served.Result, "%+v", served)
	assert.Contains(t, served.Detail, "accepted: tuna")

	ns, err := cp.Namespace(ctx, "late")
	require.NoError(t, err)
	require.NoError(t, cp.Client.Create(ctx, &tunav1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec: tunav1.DomainSpec{Subdomain: "late-shop"}}))
	host := "late-shop." + harness.BaseDomain
	svc, err := harness.CreateService(ctx, cp.Client, ns, "web", harness.ServicePort{Name: "http", Port: 8080})
	require.NoError(t, err)
	backend, err := harness.ServeEcho("web", svc.Spec.ClusterIP, 8080)
	require.NoError(t, err)
	t.Cleanup(func() { _ = backend.Close() })
	require.NoError(t, cp.Client.Create(ctx, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec: gwv1.GatewaySpec{GatewayClassName: gatewayclass.ClassName, Listeners: []gwv1.Listener{{Name: "http", Protocol: gwv1.HTTPProtocolType,
			Port: 80, Hostname: ptr(gwv1.Hostname(host))}}}}))
	require.NoError(t, cp.Client.Create(ctx, &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "shop"}}},
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
				BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: ptr(gwv1.PortNumber(8080))}}}}}}}}))

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, edge.HTTPAddr())
	}}}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		resp, err := client.Get("http://" + host + "/hello")
		require.NoError(c, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(c, err)
		require.Equal(c, http.StatusOK, resp.StatusCode, "%s", body)
		require.Contains(c, string(body), "web")
	}, wait, 100*time.Millisecond, "the HTTPRoute was never served: the agent did not notice the CRDs")

	// TCPRoute's CRD, installed later still, turns TCP listeners on.
	install(t, "tcproutes")
	require.NoError(t, cp.Client.Create(ctx, &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: tunav1.TCPEndpointSpec{Alias: "late-db"}}))
	var ep tunav1.TCPEndpoint
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, cp.Client.Get(ctx, key(ns, "db"), &ep))
		require.NotZero(c, ep.Status.Port)
	}, wait, 50*time.Millisecond)
	_, err = harness.CreateService(ctx, cp.Client, ns, "db", harness.ServicePort{Port: 5432})
	require.NoError(t, err)
	require.NoError(t, cp.Client.Create(ctx, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: gwv1.GatewaySpec{GatewayClassName: gatewayclass.ClassName, Listeners: []gwv1.Listener{{Name: "db", Protocol: gwv1.TCPProtocolType,
			Port: gwv1.PortNumber(ep.Status.Port)}}}}))
	require.NoError(t, cp.Client.Create(ctx, &gwv1.TCPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: gwv1.TCPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "db"}}},
			Rules: []gwv1.TCPRouteRule{{BackendRefs: []gwv1.BackendRef{{BackendObjectReference: gwv1.BackendObjectReference{
				Name: "db", Port: ptr(gwv1.PortNumber(5432))}}}}}}}))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var tun tunav1.Tunnel
		require.NoError(c, cp.Client.Get(ctx, key(ns, "gateway-db-db"), &tun), "the controller made no Tunnel for the TCPRoute")
		cond := status.Find(tun.Status.Conditions, tunav1.ConditionReady)
		require.NotNil(c, cond)
		require.Equal(c, []any{metav1.ConditionTrue, tunav1.ReasonConnected}, []any{cond.Status, cond.Reason}, cond.Message)
		require.Equal(c, "tcp://"+ep.Status.Address, tun.Status.URL)
	}, wait, 100*time.Millisecond, "the TCPRoute was never served: the controller did not notice its CRD")

	// With the controller gone, a GatewayClass changed since it was
	// accepted is accepted by nobody, and preflight says so instead of
	// claiming that its Gateways are published.
	require.NoError(t, env.Controller.Stop())
	env.Controller = nil // stopped for good: the suite's end does not stop it again
	require.NoError(t, cp.Client.Get(ctx, key("", gatewayclass.ClassName), gc))
	gc.Spec.Description = ptr("changed while no controller runs")
	require.NoError(t, cp.Client.Update(ctx, gc))
	served = preflightServed(t)
	assert.Equal(t, report.Warning, served.Result, "%+v", served)
	assert.Contains(t, served.Error, "not accepted for their current generation: tuna")
}

// preflightServed runs tuna-operator preflight and returns its check of
// what the running operator serves of the Gateway API.
func preflightServed(t *testing.T) report.Check {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd.Run(ctx, []string{"preflight", "-o", "json", "--kubeconfig", kubeconfig,
		"--set", "edge.apiURL=" + edge.APIURL(), "--set", "edge.apiFingerprint=" + edge.APIFingerprint(),
		"--set", "credentials.apiKey=" + edge.OperatorKey, "--set", "clusterID=" + harness.TestClusterID},
		cmd.Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
	var rep report.Report
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep), "%s\n%s", out.String(), errb.String())
	c := rep.Find("a running operator serves the GatewayClasses")
	require.NotNil(t, c, "no Gateway API serving check in %s", out.String())
	return *c
}
