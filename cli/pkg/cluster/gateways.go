package cluster

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/gatewayclass"
)

func gatewayGVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: gwv1.GroupVersion.Group, Version: gwv1.GroupVersion.Version, Resource: resource}
}

// GatewayClasses are the GatewayClasses of the operator's controllerName
// (not being deleted); nil without the Gateway API CRDs, a non-nil empty
// list when there are none.
func (c *Cluster) GatewayClasses(ctx context.Context) ([]gwv1.GatewayClass, error) {
	classes, err := c.Dynamic.Resource(gatewayGVR("gatewayclasses")).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) || IsNotServed(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing GatewayClasses: %w", err)
	}
	ours := []gwv1.GatewayClass{}
	for _, u := range classes.Items {
		var gc gwv1.GatewayClass
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &gc) == nil && gatewayclass.Ours(&gc) {
			ours = append(ours, gc)
		}
	}
	return ours, nil
}

// GatewayStatuses are the status rows of the Gateways of the operator's
// GatewayClasses and of the HTTPRoutes and TCPRoutes it reports on, in a
// namespace ("" for all). Without the Gateway API CRDs there are none.
func (c *Cluster) GatewayStatuses(ctx context.Context, namespace string) ([]Status, error) {
	classes, err := c.GatewayClasses(ctx)
	if err != nil || classes == nil {
		return nil, err
	}
	ours := map[string]bool{}
	for _, gc := range classes {
		ours[gc.Name] = true
	}
	var out []Status
	gws, err := c.Dynamic.Resource(gatewayGVR("gateways")).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing Gateways: %w", err)
	}
	for _, u := range gws.Items {
		var gw gwv1.Gateway
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &gw); err != nil {
			return nil, fmt.Errorf("reading Gateway %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		if ours[string(gw.Spec.GatewayClassName)] {
			out = append(out, gatewayStatus(&gw))
		}
	}
	for _, kind := range []string{"HTTPRoute", "TCPRoute"} {
		list, err := c.Dynamic.Resource(gatewayGVR(strings.ToLower(kind)+"s")).Namespace(namespace).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) || IsNotServed(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing %ss: %w", kind, err)
		}
		for _, u := range list.Items {
			var rs struct {
				Status gwv1.RouteStatus `json:"status"`
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rs); err != nil {
				return nil, fmt.Errorf("reading %s %s/%s: %w", kind, u.GetNamespace(), u.GetName(), err)
			}
			if s, ok := routeStatus(kind, u.GetNamespace(), u.GetName(), rs.Status.Parents); ok {
				s.Deleting = u.GetDeletionTimestamp() != nil
				s.Age = age(u.GetCreationTimestamp().Time)
				out = append(out, s)
			}
		}
	}
	return out, nil
}

// gatewayStatus is a Gateway's row: its addresses, Ready from Programmed,
// and the listeners that are not accepted.
func gatewayStatus(gw *gwv1.Gateway) Status {
	s := Status{Kind: "Gateway", Namespace: gw.Namespace, Name: gw.Name, Ready: "Unknown", Reason: "Pending",
		Deleting: gw.DeletionTimestamp != nil, Age: age(gw.CreationTimestamp.Time)}
	var addrs []string
	for _, a := range gw.Status.Addresses {
		addrs = append(addrs, a.Value)
	}
	s.Address = strings.Join(addrs, ", ")
	if c := meta.FindStatusCondition(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed)); c != nil {
		s.Ready, s.Reason, s.Message = string(c.Status), c.Reason, c.Message
	}
	var bad []string
	for _, l := range gw.Status.Listeners {
		if c := meta.FindStatusCondition(l.Conditions, string(gwv1.ListenerConditionAccepted)); c != nil && c.Status != metav1.ConditionTrue {
			bad = append(bad, fmt.Sprintf("listener %s: %s", l.Name, c.Message))
		}
	}
	if len(bad) > 0 {
		s.Message = strings.Join(bad, "; ")
	}
	return s
}

// routeStatus is a route's row from this controller's parent entries:
// Ready when every parent has Accepted and ResolvedRefs True; the first
// condition that is not gives the reason. ok is false when the operator
// has no entry in the route's status.
func routeStatus(kind, ns, name string, parents []gwv1.RouteParentStatus) (Status, bool) {
	s := Status{Kind: kind, Namespace: ns, Name: name, Ready: "True"}
	found := false
	var gws []string
	for _, p := range parents {
		if p.ControllerName != gatewayclass.ControllerName {
			continue
		}
		found = true
		pns := ns
		if p.ParentRef.Namespace != nil {
			pns = string(*p.ParentRef.Namespace)
		}
		gws = append(gws, "gateway/"+pns+"/"+string(p.ParentRef.Name))
		for _, t := range []string{string(gwv1.RouteConditionAccepted), string(gwv1.RouteConditionResolvedRefs)} {
			c := meta.FindStatusCondition(p.Conditions, t)
			switch {
			case c == nil && s.Ready == "True":
				s.Ready, s.Reason = "Unknown", "Pending"
			case c != nil && c.Status != metav1.ConditionTrue && s.Ready != "False":
				s.Ready, s.Reason, s.Message = "False", c.Reason, c.Message
			}
		}
	}
	s.Address = strings.Join(gws, ", ")
	return s, found
}
