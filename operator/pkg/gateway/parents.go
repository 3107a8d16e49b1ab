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
// times) and setting Accepted and resolved (ResolvedRefs). problem, when
// not empty, refuses a parent that would accept the route with
// UnsupportedValue: a rule the operator cannot serve. ns is the route's
// namespace (a parentRef's default) and generation its metadata's.
func RouteParents(old []gwv1.RouteParentStatus, parents []Parent, ns string, generation int64, resolved metav1.Condition, problem string) []gwv1.RouteParentStatus {
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
		case problem != "":
			accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, string(gwv1.RouteReasonUnsupportedValue), problem
		}
		meta.SetStatusCondition(&st.Conditions, accepted)
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
