package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/stats"
)

// The chart's FlowSchema on the real kube-apiserver (Priority and
// Fairness on, as by default). Without it, the controller's Lease
// requests are classified as every other request of its ServiceAccount
// (schema service-accounts, level workload-low), where they queue behind
// its status writes. With it, the Lease requests of both components' own
// ServiceAccounts are in the leader-election level, their other requests
// stay where they were, and a same-named ServiceAccount of another
// namespace gains nothing; an elected controller's renewals are
// dispatched under it, by the apiserver's own counter.
func TestLeaseRequestsAreClassifiedAsLeaderElection(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	lease := "/apis/coordination.k8s.io/v1/namespaces/" + harness.OperatorNamespace + "/leases/"
	tunnels := "/apis/k8s.tuna.am/v1alpha1/namespaces/" + ns + "/tunnels"
	workloadLow := apfClass{schemaUID(t, "service-accounts"), levelUID(t, "workload-low")}
	require.Equal(t, workloadLow, classify(t, env.IDs.Controller, http.MethodGet, lease+controllerLease),
		"without the FlowSchema, the controller's lease requests")
	require.Equal(t, workloadLow, classify(t, env.IDs.Controller, http.MethodGet, tunnels),
		"the controller's other requests")

	fs := chartFlowSchema(t)
	require.NoError(t, env.CP.Client.Create(ctx, fs))
	t.Cleanup(func() { assert.NoError(t, env.CP.Client.Delete(context.Background(), fs)) })
	leaderElection := apfClass{string(fs.UID), levelUID(t, "leader-election")}
	// The apiserver's configuration controller takes a new FlowSchema in
	// on its own schedule.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, leaderElection, classify(t, env.IDs.Controller, http.MethodGet, lease+controllerLease))
	}, wait, 100*time.Millisecond, "the controller's lease requests under the chart's FlowSchema")
	assert.Equal(t, leaderElection, classify(t, env.IDs.Agent, http.MethodGet, lease+"tuna-agent-a"), "an agent's heartbeat Lease")
	assert.Equal(t, leaderElection, classify(t, env.IDs.Agent, http.MethodDelete, lease+"tuna-agent-a"), "an agent's heartbeat Lease, deleted")
	assert.Equal(t, workloadLow, classify(t, env.IDs.Controller, http.MethodGet, tunnels), "the controller's other requests")
	assert.Equal(t, workloadLow, classify(t, env.IDs.Controller, http.MethodGet, "/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases/x"),
		"the controller's Leases outside the release namespace")
	impostor := rest.CopyConfig(env.IDs.Controller)
	impostor.Impersonate.UserName = "system:serviceaccount:" + ns + ":" + saName(env.IDs.Controller)
	impostor.Impersonate.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	assert.Equal(t, workloadLow, classify(t, impostor, http.MethodGet, "/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases/"+controllerLease),
		"a ServiceAccount of the same name in another namespace")

	// An elected controller's own renewals (every retryPeriod) are
	// dispatched under the FlowSchema.
	stopController(t)
	before := dispatched(t, fs.Name)
	elected := startController(func(o *app.ControllerOptions) { o.LeaderElection = true })
	t.Cleanup(func() { assert.NoError(t, elected.Stop()) })
	require.Eventually(t, func() bool { return holder(t) != "" }, wait, 50*time.Millisecond, "the controller leads")
	require.Eventually(t, func() bool { return dispatched(t, fs.Name) >= before+3 }, wait, 200*time.Millisecond,
		"the elected controller's lease requests counted under the FlowSchema, leader-election level")
}

// apfClass is how Priority and Fairness classified a request.
type apfClass struct{ schema, level string }

// classify sends one request as cfg's identity and returns its class, from
// the apiserver's answer headers.
func classify(t *testing.T, cfg *rest.Config, method, path string) apfClass {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	req, err := http.NewRequest(method, strings.TrimSuffix(cfg.Host, "/")+path, nil)
	require.NoError(t, err)
	resp, err := hc.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return apfClass{resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID),
		resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID)}
}

func schemaUID(t *testing.T, name string) string {
	t.Helper()
	var fs flowcontrolv1.FlowSchema
	require.NoError(t, env.CP.Client.Get(context.Background(), types.NamespacedName{Name: name}, &fs))
	return string(fs.UID)
}

func levelUID(t *testing.T, name string) string {
	t.Helper()
	var pl flowcontrolv1.PriorityLevelConfiguration
	require.NoError(t, env.CP.Client.Get(context.Background(), types.NamespacedName{Name: name}, &pl))
	return string(pl.UID)
}

// chartFlowSchema is the chart's FlowSchema, not yet in the apiserver.
func chartFlowSchema(t *testing.T) *flowcontrolv1.FlowSchema {
	t.Helper()
	fs, err := harness.ChartFlowSchema()
	require.NoError(t, err)
	var old flowcontrolv1.FlowSchema
	err = env.CP.Client.Get(context.Background(), types.NamespacedName{Name: fs.Name}, &old)
	require.True(t, apierrors.IsNotFound(err), "FlowSchema %s is there before the test: %v", fs.Name, err)
	return fs
}

// saName is the name of the ServiceAccount cfg impersonates.
func saName(cfg *rest.Config) string {
	u := cfg.Impersonate.UserName
	for i := len(u) - 1; i >= 0; i-- {
		if u[i] == ':' {
			return u[i+1:]
		}
	}
	return u
}

// dispatched is the apiserver's count of requests dispatched under the
// FlowSchema schema in the leader-election level.
func dispatched(t *testing.T, schema string) float64 {
	t.Helper()
	hc, err := rest.HTTPClientFor(env.CP.Config)
	require.NoError(t, err)
	families, err := stats.Scrape(hc, strings.TrimSuffix(env.CP.Config.Host, "/")+"/metrics")
	require.NoError(t, err)
	n := 0.0
	for _, m := range families["apiserver_flowcontrol_dispatched_requests_total"].GetMetric() {
		var fs, pl string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "flow_schema":
				fs = l.GetValue()
			case "priority_level":
				pl = l.GetValue()
			}
		}
		if fs == schema && pl == "leader-election" {
			n += m.GetCounter().GetValue()
		}
	}
	return n
}
