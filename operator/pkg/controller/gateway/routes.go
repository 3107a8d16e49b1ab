package gateway

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	model "code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/scope"
)

// routes writes every HTTPRoute's parent status for the served Gateways and
// returns, per Gateway, how many routes attached to each listener.
func (r *Reconciler) routes(ctx context.Context, gws model.Gateways, grants []gwv1.ReferenceGrant) (map[types.NamespacedName]map[string]int32, error) {
	attached := map[types.NamespacedName]map[string]int32{}
	var routes gwv1.HTTPRouteList
	if err := scope.List(ctx, r.Client, &routes, r.Namespaces); err != nil {
		return nil, err
	}
	nsLabels := map[string]labels.Set{}
	for i := range routes.Items {
		rt := &routes.Items[i]
		parents := model.Attach(model.RouteInfo{Kind: "HTTPRoute", Namespace: rt.Namespace, Hostnames: rt.Spec.Hostnames,
			Parents: rt.Spec.ParentRefs, NamespaceLabels: r.namespaceLabels(ctx, rt.Namespace, nsLabels)}, gws)
		for _, p := range parents {
			key := client.ObjectKeyFromObject(p.Gateway)
			if attached[key] == nil {
				attached[key] = map[string]int32{}
			}
			for _, l := range p.Attached {
				attached[key][l]++
			}
		}
		resolved, err := r.resolvedRefs(ctx, rt, grants)
		if err != nil {
			return nil, err
		}
		problem := ""
		for _, rule := range model.Rules([]*gwv1.HTTPRoute{rt}) {
			if rule.Problem != "" {
				problem = fmt.Sprintf("rule %d: %s", rule.Index, rule.Problem)
				break
			}
		}
		if err := writeParents(ctx, r.Client, "HTTPRoute", rt, func(x *gwv1.HTTPRoute) *gwv1.RouteStatus { return &x.Status.RouteStatus }, parents, resolved, problem); err != nil {
			return nil, err
		}
	}
	return attached, nil
}

// resolvedRefs is the route's ResolvedRefs condition: every backendRef is
// a Service that exists, in the route's namespace or in one whose
// ReferenceGrant allows it.
func (r *Reconciler) resolvedRefs(ctx context.Context, rt *gwv1.HTTPRoute, grants []gwv1.ReferenceGrant) (metav1.Condition, error) {
	c := metav1.Condition{Type: string(gwv1.RouteConditionResolvedRefs), Status: metav1.ConditionTrue, Reason: string(gwv1.RouteReasonResolvedRefs),
		Message: "every backendRef is a Service that exists", ObservedGeneration: rt.Generation}
	fail := func(reason gwv1.RouteConditionReason, msg string) {
		if c.Status == metav1.ConditionTrue {
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, string(reason), msg
		}
	}
	for ri, rule := range rt.Spec.Rules {
		for _, b := range rule.BackendRefs {
			ref := b.BackendObjectReference
			if (ref.Group != nil && *ref.Group != "") || (ref.Kind != nil && *ref.Kind != "Service") {
				fail(gwv1.RouteReasonInvalidKind, fmt.Sprintf("rule %d: backendRef %s is not a Service: only Services are published", ri, ref.Name))
				continue
			}
			ns := rt.Namespace
			if ref.Namespace != nil {
				ns = string(*ref.Namespace)
			}
			if ns != rt.Namespace && !model.Granted(grants, "HTTPRoute", rt.Namespace, ns, string(ref.Name)) {
				fail(gwv1.RouteReasonRefNotPermitted, fmt.Sprintf("rule %d: backendRef %s/%s is in another namespace and no ReferenceGrant there allows HTTPRoutes of namespace %s to refer to it", ri, ns, ref.Name, rt.Namespace))
				continue
			}
			var svc corev1.Service
			err := r.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: string(ref.Name)}, &svc)
			switch {
			case apierrors.IsNotFound(err):
				fail(gwv1.RouteReasonBackendNotFound, fmt.Sprintf("rule %d: Service %s/%s does not exist", ri, ns, ref.Name))
			case apierrors.IsForbidden(err):
				// Without loadBalancer.enabled the controller may not read
				// Services: the agent, which resolves them, answers 500 for
				// a missing one.
			case err != nil:
				return c, fmt.Errorf("reading Service %s/%s: %w", ns, ref.Name, err)
			}
		}
	}
	return c, nil
}

// writeParents writes rt's status.parents (model.RouteParents) when they
// changed; status reaches the route's RouteStatus, and kind names it in
// errors. HTTPRoutes and TCPRoutes share it.
func writeParents[T client.Object](ctx context.Context, c client.Client, kind string, rt T, status func(T) *gwv1.RouteStatus,
	parents []model.Parent, resolved metav1.Condition, problem string) error {
	old := status(rt).Parents
	next := model.RouteParents(old, parents, rt.GetNamespace(), rt.GetGeneration(), resolved, problem)
	if !model.ParentsChanged(old, next) {
		return nil
	}
	out := rt.DeepCopyObject().(T)
	if next == nil {
		next = []gwv1.RouteParentStatus{}
	}
	status(out).Parents = next
	if err := c.Status().Update(ctx, out); err != nil {
		return fmt.Errorf("writing the status of %s %s/%s: %w", kind, rt.GetNamespace(), rt.GetName(), err)
	}
	return nil
}
