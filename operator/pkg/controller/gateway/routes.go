package gateway

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	model "code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
)

// routes writes every HTTPRoute's parent status for the served Gateways and
// returns, per Gateway, how many routes attached to each listener.
func (r *Reconciler) routes(ctx context.Context, gws model.Gateways, grants []gwv1.ReferenceGrant) (map[types.NamespacedName]map[string]int32, error) {
	attached := map[types.NamespacedName]map[string]int32{}
	var routes gwv1.HTTPRouteList
	if err := listEach(ctx, r.Client, &routes, r.Namespaces, func() client.ObjectList { return &gwv1.HTTPRouteList{} }, func(l client.ObjectList) { routes.Items = append(routes.Items, l.(*gwv1.HTTPRouteList).Items...) }); err != nil {
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
		if err := r.writeRoute(ctx, rt, parents, resolved, problem); err != nil {
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

// writeRoute replaces this controller's entries in status.parents and
// keeps other controllers' ones.
func (r *Reconciler) writeRoute(ctx context.Context, rt *gwv1.HTTPRoute, parents []model.Parent, resolved metav1.Condition, problem string) error {
	var next []gwv1.RouteParentStatus
	for _, p := range rt.Status.Parents {
		if p.ControllerName != model.ControllerName {
			next = append(next, p)
		}
	}
	for _, p := range parents {
		st := gwv1.RouteParentStatus{ParentRef: p.Ref, ControllerName: model.ControllerName}
		for _, old := range rt.Status.Parents {
			if old.ControllerName == model.ControllerName && sameRef(old.ParentRef, p.Ref, rt.Namespace) {
				st.Conditions = append(st.Conditions, old.Conditions...)
			}
		}
		accepted := metav1.Condition{Type: string(gwv1.RouteConditionAccepted), Status: metav1.ConditionTrue, Reason: string(p.Reason),
			Message: p.Message, ObservedGeneration: rt.Generation}
		if !p.Accepted {
			accepted.Status = metav1.ConditionFalse
		} else if problem != "" {
			accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, string(gwv1.RouteReasonUnsupportedValue), problem
		}
		meta.SetStatusCondition(&st.Conditions, accepted)
		meta.SetStatusCondition(&st.Conditions, resolved)
		next = append(next, st)
	}
	if equality.Semantic.DeepEqual(next, rt.Status.Parents) || (len(next) == 0 && len(rt.Status.Parents) == 0) {
		return nil
	}
	out := rt.DeepCopy()
	out.Status.Parents = next
	if out.Status.Parents == nil {
		out.Status.Parents = []gwv1.RouteParentStatus{}
	}
	if err := r.Client.Status().Update(ctx, out); err != nil {
		return fmt.Errorf("writing the status of HTTPRoute %s/%s: %w", rt.Namespace, rt.Name, err)
	}
	return nil
}

func sameRef(a, b gwv1.ParentReference, ns string) bool {
	str := func(p gwv1.ParentReference) string {
		n := ns
		if p.Namespace != nil {
			n = string(*p.Namespace)
		}
		s := n + "/" + string(p.Name)
		if p.SectionName != nil {
			s += "#" + string(*p.SectionName)
		}
		if p.Port != nil {
			s += fmt.Sprintf(":%d", *p.Port)
		}
		return strings.ToLower(s)
	}
	return str(a) == str(b)
}
