package preflight

import (
	"context"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"code.tuna.am/tuna/k8s-operator/chart"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/values"
)

// CatGatewayAPI is the category of the Gateway API check.
const CatGatewayAPI = "gateway-api"

// gatewayAPIKinds are the Gateway API kinds the operator needs; the chart
// does not install their CRDs.
var gatewayAPIKinds = []string{"GatewayClass", "Gateway", "HTTPRoute", "ReferenceGrant"}

// gatewayAPI reports whether the Gateway API's CRDs are installed: without
// them the operator runs with Gateway support off, which is fine unless
// the values ask for the GatewayClass.
func (p *run) gatewayAPI(ctx context.Context, r *chart.Rendered) {
	const desc = "the Gateway API CRDs (gateway.networking.k8s.io/v1) are installed"
	list, err := p.c.Kube.Discovery().ServerResourcesForGroupVersion("gateway.networking.k8s.io/v1")
	var missing []string
	switch {
	case apierrors.IsNotFound(err):
		missing = gatewayAPIKinds
	case err != nil:
		p.rep.Fail(CatGatewayAPI, "can read the API server's discovery", err.Error(), "")
		return
	default:
		for _, k := range gatewayAPIKinds {
			if !slices.ContainsFunc(list.APIResources, func(res metav1.APIResource) bool { return res.Kind == k }) {
				missing = append(missing, k)
			}
		}
	}
	if len(missing) == 0 {
		p.rep.OK(CatGatewayAPI, desc, "Gateways of class controllerName k8s.tuna.am/gateway-controller are published")
		return
	}
	detail := "missing: " + strings.Join(missing, ", ")
	hint := "install the Gateway API standard channel (kubectl apply --server-side -f https://github.com/kubernetes-sigs/gateway-api/releases/download/v1.6.3/standard-install.yaml), then restart the operator"
	if r != nil && values.Bool(r.Values, "gatewayClass.enabled") {
		p.rep.Fail(CatGatewayAPI, desc, detail+"; gatewayClass.enabled=true needs them", hint+", or set gatewayClass.enabled=false")
		return
	}
	p.rep.Warn(CatGatewayAPI, desc, detail+": Gateway support stays off (Ingresses and LoadBalancer Services work without them)", hint)
}
