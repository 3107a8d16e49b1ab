package gateway

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/gatewayclass"
)

// RouteParents is a route's status.parents after this controller's turn,
// for HTTPRoutes and TCPRoutes alike: other controllers' entries stay as
// they are; this controller's are one per parent it evaluated, keeping the
// conditions it wrote before for the same parentRef (their transition
// times) and setting Accepted and resolved (ResolvedRefs). unserved says
// which rules the operator cannot serve: when none is served, a parent
// that would accept the route refuses it with UnsupportedValue; when
// others are, the route is accepted and PartiallyInvalid says which rules
// are dropped (the Gateway API's "Drop Rule(s)": a route is accepted when
// one of its rules is served). ns is the route's namespace (a parentRef's
// default) and generation its metadata's.
func RouteParents(old []gwv1.RouteParentStatus, parents []Parent, ns string, generation int64, resolved metav1.Condition, unserved Unserved) []gwv1.RouteParentStatus {
	var next []gwv1.RouteParentStatus
	for _, p := range old {
		if p.ControllerName != gatewayclass.ControllerName {
			next = append(next, p)
		}
	}
	for _, p := range parents {
		st := gwv1.RouteParentStatus{ParentRef: p.Ref, ControllerName: gatewayclass.ControllerName}
		for _, o := range old {
			if o.ControllerName == gatewayclass.ControllerName && SameParentRef(o.ParentRef, p.Ref, ns) {
				st.Conditions = append(st.Conditions, o.Conditions...)
			}
		}
		accepted := metav1.Condition{Type: string(gwv1.RouteConditionAccepted), Status: metav1.ConditionTrue, Reason: string(p.Reason),
			Message: p.Message, ObservedGeneration: generation}
		switch {
		case !p.Accepted:
			accepted.Status = metav1.ConditionFalse
		case unserved.Problem != "" && !unserved.Partial:
			accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, string(gwv1.RouteReasonUnsupportedValue), unserved.Problem
		}
		meta.SetStatusCondition(&st.Conditions, accepted)
		if p.Accepted && unserved.Problem != "" && unserved.Partial {
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: string(gwv1.RouteConditionPartiallyInvalid), Status: metav1.ConditionTrue,
				Reason: string(gwv1.RouteReasonUnsupportedValue), Message: "Dropped Rule " + strings.TrimPrefix(unserved.Problem, "rule ") + "; the route's other rules are served", ObservedGeneration: generation})
		} else {
			meta.RemoveStatusCondition(&st.Conditions, string(gwv1.RouteConditionPartiallyInvalid))
		}
		meta.SetStatusCondition(&st.Conditions, resolved)
		next = append(next, st)
	}
	return next
}

// ParentsChanged reports whether next differs from old: a route needs no
// status write otherwise (nil and empty are the same).
func ParentsChanged(old, next []gwv1.RouteParentStatus) bool {
	return (len(next) != 0 || len(old) != 0) && !equality.Semantic.DeepEqual(next, old)
}

// SameParentRef reports whether a and b name the same parent (Gateway,
// section and port), ns being the route's namespace.
func SameParentRef(a, b gwv1.ParentReference, ns string) bool {
	return parentKey(a, ns) == parentKey(b, ns)
}

func parentKey(p gwv1.ParentReference, ns string) string {
	if p.Namespace != nil {
		ns = string(*p.Namespace)
	}
	s := ns + "/" + string(p.Name)
	if p.SectionName != nil {
		s += "#" + string(*p.SectionName)
	}
	if p.Port != nil {
		s += fmt.Sprintf(":%d", *p.Port)
	}
	return strings.ToLower(s)
}
