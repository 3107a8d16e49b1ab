package cluster

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/lbclass"
)

// KindLoadBalancer is the Kind column of a LoadBalancer Service in status.
const KindLoadBalancer = "Service"

// LoadBalancers lists the LoadBalancer Services the operator publishes in
// a namespace ("" for all), sorted by namespace and name: those of class
// k8s.tuna.am/tuna or tuna, and classless ones it took (its finalizer).
func (c *Cluster) LoadBalancers(ctx context.Context, namespace string) ([]corev1.Service, error) {
	list, err := c.Kube.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.type", string(corev1.ServiceTypeLoadBalancer)).String()})
	if err != nil {
		return nil, fmt.Errorf("listing Services of type LoadBalancer: %w", err)
	}
	var out []corev1.Service
	for _, svc := range list.Items {
		if lbclass.Serves(&svc, false) || lbclass.Published(&svc) {
			out = append(out, svc)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// loadBalancerStatus is a Service's row of status: its hosts and ports,
// Ready when every TCP port is listed in status.loadBalancer without an
// error, False when one is listed with an error, Unknown while ports are
// still missing.
func loadBalancerStatus(svc *corev1.Service) Status {
	s := Status{Kind: KindLoadBalancer, Namespace: svc.Namespace, Name: svc.Name, Ready: "Unknown", Reason: "Pending",
		Deleting: svc.DeletionTimestamp != nil, Age: age(svc.CreationTimestamp.Time)}
	listed := map[int32]bool{}
	var addrs, problems []string
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		host := ing.Hostname
		if ing.IP != "" {
			host = ing.IP
		}
		var ports []string
		for _, p := range ing.Ports {
			listed[p.Port] = true
			ports = append(ports, strconv.Itoa(int(p.Port)))
			if p.Error != nil {
				problems = append(problems, fmt.Sprintf("port %d: %s", p.Port, strings.TrimPrefix(*p.Error, lbclass.ErrorPrefix)))
				if s.Ready != "False" {
					s.Ready, s.Reason = "False", strings.TrimPrefix(*p.Error, lbclass.ErrorPrefix)
				}
			}
		}
		addrs = append(addrs, host+" ("+strings.Join(ports, ",")+")")
	}
	var missing []string
	for _, p := range svc.Spec.Ports {
		if (p.Protocol == "" || p.Protocol == corev1.ProtocolTCP) && !listed[p.Port] {
			missing = append(missing, strconv.Itoa(int(p.Port)))
		}
	}
	s.Address = strings.Join(addrs, ", ")
	switch {
	case s.Ready == "False":
	case len(missing) == 0 && len(addrs) > 0:
		s.Ready, s.Reason = "True", "Published"
	}
	if len(missing) > 0 {
		problems = append(problems, "not published yet: port "+strings.Join(missing, ", ")+" (kubectl describe service "+svc.Name+" says why)")
	}
	s.Message = strings.Join(problems, "; ")
	return s
}
