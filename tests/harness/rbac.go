package harness

import (
	"context"
	"fmt"
	"maps"

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
