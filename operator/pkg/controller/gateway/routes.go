package gateway

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	model "code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
)

// resolvedRefs is an HTTPRoute's ResolvedRefs condition: every backendRef
// is a Service that exists (service says), in the route's namespace or in
// one whose ReferenceGrant allows it.
func resolvedRefs(rt *gwv1.HTTPRoute, grants []gwv1.ReferenceGrant, service func(ns, name string) (bool, error)) (metav1.Condition, error) {
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
			exists, err := service(ns, string(ref.Name))
			if err != nil {
				return c, err
			}
			if !exists {
				fail(gwv1.RouteReasonBackendNotFound, fmt.Sprintf("rule %d: Service %s/%s does not exist", ri, ns, ref.Name))
			}
		}
	}
	return c, nil
}

// writeParents writes rt's next status.parents (model.RouteParents) when
// they changed; status reaches the route's RouteStatus, and kind names it
// in errors. HTTPRoutes and TCPRoutes share it.
func writeParents[T client.Object](ctx context.Context, c client.Client, kind string, rt T, status func(T) *gwv1.RouteStatus, next []gwv1.RouteParentStatus) error {
	old := status(rt).Parents
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
