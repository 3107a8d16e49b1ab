package preflight

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"code.tuna.am/tuna/k8s-operator/chart"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/values"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/lbclass"
)

// CatLoadBalancer is the category of the LoadBalancer Service checks.
const CatLoadBalancer = "load-balancer"

// loadBalancers checks the LoadBalancer Services the values would serve:
// those of class tuna stay pending when loadBalancer.enabled is off, and
// with loadBalancer.classless a classless Service that another load
// balancer already serves would be answered for twice.
func (p *run) loadBalancers(ctx context.Context, r *chart.Rendered) {
	if r == nil {
		return
	}
	enabled := values.Bool(r.Values, "loadBalancer.enabled")
	classless := values.Bool(r.Values, "loadBalancer.classless")
	list, err := p.c.Kube.CoreV1().Services("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.type", string(corev1.ServiceTypeLoadBalancer)).String()})
	if err != nil {
		p.rep.Warn(CatLoadBalancer, "can list Services of type LoadBalancer", err.Error(), "the caller needs list on services to check them; the install does not")
		return
	}
	var ours, taken, pending []string
	for _, svc := range list.Items {
		name := svc.Namespace + "/" + svc.Name
		switch {
		case lbclass.Serves(&svc, false) || lbclass.Published(&svc):
			ours = append(ours, name)
		case svc.Spec.LoadBalancerClass != nil:
		case len(svc.Status.LoadBalancer.Ingress) > 0:
			taken = append(taken, name)
		default:
			pending = append(pending, name)
		}
	}
	desc := "LoadBalancer Services of class " + lbclass.Class + " are published"
	switch {
	case !enabled && len(ours) > 0:
		p.rep.Warn(CatLoadBalancer, desc, "loadBalancer.enabled=false, but these wait for tuna: "+strings.Join(ours, ", "),
			"set loadBalancer.enabled=true, or remove their loadBalancerClass")
	case !enabled:
		p.rep.OK(CatLoadBalancer, desc, "loadBalancer.enabled=false: the controller leaves Services alone")
	default:
		p.rep.OK(CatLoadBalancer, desc, fmt.Sprintf("%d found", len(ours)))
	}
	if !enabled {
		return
	}
	desc = "no classless LoadBalancer Service is served twice"
	switch {
	case classless && len(taken) > 0:
		p.rep.Fail(CatLoadBalancer, desc, "another load balancer already serves these classless Services: "+strings.Join(taken, ", "),
			"set loadBalancer.classless=false and give the Services tuna should publish loadBalancerClass: "+lbclass.Class)
	case classless:
		p.rep.OK(CatLoadBalancer, desc, fmt.Sprintf("loadBalancer.classless=true: %d classless Services would be published", len(pending)))
	case len(pending) > 0:
		p.rep.Warn(CatLoadBalancer, desc, "these classless LoadBalancer Services have no load balancer: "+strings.Join(pending, ", "),
			"to publish them through tuna, give them loadBalancerClass: "+lbclass.Class+" (or set loadBalancer.classless=true when tuna is the cluster's only load balancer)")
	default:
		p.rep.OK(CatLoadBalancer, desc, "loadBalancer.classless=false")
	}
}
