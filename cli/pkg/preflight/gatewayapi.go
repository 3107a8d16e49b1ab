package preflight

import (
	"context"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"code.tuna.am/tuna/k8s-operator/chart"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/values"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gatewayclass"
)

// CatGatewayAPI is the category of the Gateway API check.
const CatGatewayAPI = "gateway-api"

// gatewayAPI reports whether the Gateway API's CRDs are installed: without
// them the operator runs with Gateway support off, which is fine unless
// the values ask for the GatewayClass.
func (p *run) gatewayAPI(ctx context.Context, r *chart.Rendered) {
	const desc = "the Gateway API CRDs (gateway.networking.k8s.io/v1) are installed"
	list, err := p.c.Kube.Discovery().ServerResourcesForGroupVersion("gateway.networking.k8s.io/v1")
	var missing []string
	switch {
	case apierrors.IsNotFound(err):
		missing = gatewayclass.Kinds()
	case err != nil:
		p.rep.Fail(CatGatewayAPI, "can read the API server's discovery", err.Error(), "")
		return
	default:
		for _, k := range gatewayclass.Kinds() {
			if !slices.ContainsFunc(list.APIResources, func(res metav1.APIResource) bool { return res.Kind == k }) {
				missing = append(missing, k)
			}
		}
	}
	if len(missing) == 0 {
		p.rep.OK(CatGatewayAPI, desc, "")
		p.gatewaysServed(ctx)
		return
	}
	detail := "missing: " + strings.Join(missing, ", ")
	hint := "install the Gateway API standard channel v1.6.3 (kubectl apply --server-side -f " +
		"https://github.com/kubernetes-sigs/gateway-api/releases/download/v1.6.3/standard-install.yaml, or offline from a checkout: " +
		"kubectl apply --server-side -f \"$(go list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api)/config/crd/standard/\"); " +
		"a running operator serves them within 10 s, without a restart"
	if r != nil && values.Bool(r.Values, "gatewayClass.enabled") {
		p.rep.Fail(CatGatewayAPI, desc, detail+"; gatewayClass.enabled=true needs them", hint+", or set gatewayClass.enabled=false")
		return
	}
	p.rep.Warn(CatGatewayAPI, desc, detail+": Gateway support stays off (Ingresses and LoadBalancer Services work without them)", hint)
}

// gatewaysServed reports what the running operator serves: its controller
// accepts the GatewayClasses of its controllerName once it serves the
// Gateway API, so one not accepted for its current generation means no
// running controller serves it (none runs, or it has not looked since
// the CRDs came, which it does every 10 s).
func (p *run) gatewaysServed(ctx context.Context) {
	desc := "a running operator serves the GatewayClasses of controllerName " + string(gatewayclass.ControllerName)
	classes, err := p.c.GatewayClasses(ctx)
	if err != nil {
		p.rep.Warn(CatGatewayAPI, desc, "not checked: "+err.Error(), "the caller needs list on gatewayclasses to check this")
		return
	}
	if len(classes) == 0 {
		p.rep.OK(CatGatewayAPI, desc, "there is none yet: gatewayClass.enabled=true makes the chart create the GatewayClass "+gatewayclass.ClassName)
		return
	}
	var accepted, waiting []string
	for _, gc := range classes {
		if c := meta.FindStatusCondition(gc.Status.Conditions, "Accepted"); c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == gc.Generation {
			accepted = append(accepted, gc.Name)
		} else {
			waiting = append(waiting, gc.Name)
		}
	}
	if len(waiting) > 0 {
		p.rep.Warn(CatGatewayAPI, desc, "not accepted for their current generation: "+strings.Join(waiting, ", ")+
			": no running controller serves Gateways of them yet",
			"install or start the operator; a running one serves the Gateway API within 10 s of its CRDs, and its log says "+
				"\"the Gateway API is installed: serving it\"")
		return
	}
	p.rep.OK(CatGatewayAPI, desc, "accepted: "+strings.Join(accepted, ", ")+"; their Gateways are published")
}
