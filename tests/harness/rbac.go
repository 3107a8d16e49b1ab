package harness

import (
	"context"
	"errors"
	"fmt"
	"maps"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"code.tuna.am/tuna/k8s-operator/chart"
)

// Identities are the rest configs of the chart's two ServiceAccounts.
type Identities struct {
	Controller, Agent *rest.Config
}

// ChartIdentities renders the chart, creates the ServiceAccounts and RBAC
// of its controller and agent in the real apiserver, and returns configs
// that impersonate them. Components run with these configs have exactly the
// permissions the chart grants in a cluster, so a missing or an extra
// permission shows in the tests.
func (cp *ControlPlane) ChartIdentities(ctx context.Context) (*Identities, error) {
	return cp.ChartIdentitiesWith(ctx, nil)
}

// ChartIdentitiesWith is ChartIdentities with more chart values set at the
// top level, e.g. {"watchNamespaces": []any{"team-a"}}; the namespaces the
// chart puts Roles in must exist.
func (cp *ControlPlane) ChartIdentitiesWith(ctx context.Context, values map[string]any) (*Identities, error) {
	rendered, err := renderForTests(values)
	if err != nil {
		return nil, err
	}
	ids := &Identities{}
	for component, cfg := range map[string]**rest.Config{"controller": &ids.Controller, "agent": &ids.Agent} {
		rbac, err := rendered.RBAC(component)
		if err != nil {
			return nil, fmt.Errorf("reading the %s's RBAC: %w", component, err)
		}
		for _, obj := range rbac.Objects() {
			if err := cp.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
			}
		}
		c := rest.CopyConfig(cp.Config)
		c.Impersonate = rest.ImpersonationConfig{UserName: rbac.Username(), Groups: rbac.Groups()}
		*cfg = c
	}
	return ids, nil
}

// renderForTests renders the chart for the tests' release, with values
// set at the top level over the defaults the tests need.
func renderForTests(values map[string]any) (*chart.Rendered, error) {
	vals := map[string]any{
		"credentials": map[string]any{"apiKey": "rendered-for-rbac-only"},
		"edge":        map[string]any{"apiURL": "http://127.0.0.1:1"},
		"clusterID":   TestClusterID,
		"secretSync":  map[string]any{"enabled": true},
	}
	maps.Copy(vals, values)
	rendered, err := chart.Render(vals, chart.Options{Namespace: OperatorNamespace})
	if err != nil {
		return nil, fmt.Errorf("rendering the chart: %w", err)
	}
	return rendered, nil
}

// ChartFlowSchema is the FlowSchema the chart renders for the release of
// ChartIdentities: it gives the Lease requests of both components the
// leader-election priority level.
func ChartFlowSchema() (*flowcontrolv1.FlowSchema, error) {
	rendered, err := renderForTests(nil)
	if err != nil {
		return nil, err
	}
	for _, m := range rendered.Manifests {
		if m.Kind() == "FlowSchema" {
			var fs flowcontrolv1.FlowSchema
			if err := m.Into(&fs); err != nil {
				return nil, fmt.Errorf("decoding the chart's FlowSchema: %w", err)
			}
			return &fs, nil
		}
	}
	return nil, errors.New("the chart renders no FlowSchema")
}
