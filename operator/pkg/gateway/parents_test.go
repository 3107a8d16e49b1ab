package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/gatewayclass"
)

func TestRouteParents(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	web := gwv1.ParentReference{Name: "web"}
	api := gwv1.ParentReference{Name: "api", Namespace: ptr(gwv1.Namespace("team")), SectionName: ptr(gwv1.SectionName("http"))}
	other := gwv1.RouteParentStatus{ParentRef: gwv1.ParentReference{Name: "theirs"}, ControllerName: "example.com/other",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"}}}
	old := []gwv1.RouteParentStatus{other, {ParentRef: gwv1.ParentReference{Name: "WEB", Namespace: ptr(gwv1.Namespace("team"))}, ControllerName: gatewayclass.ControllerName,
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: then}}},
		{ParentRef: gwv1.ParentReference{Name: "gone"}, ControllerName: gatewayclass.ControllerName}}
	resolved := metav1.Condition{Type: string(gwv1.RouteConditionResolvedRefs), Status: metav1.ConditionTrue, Reason: "ResolvedRefs", ObservedGeneration: 3}
	parents := []Parent{
		{Ref: web, Accepted: true, Reason: gwv1.RouteReasonAccepted, Message: "attached"},
		{Ref: api, Reason: gwv1.RouteReasonNotAllowedByListeners, Message: "not allowed"},
	}

	next := RouteParents(old, parents, "team", 3, resolved, Unserved{})
	require.Len(t, next, 3)
	assert.Equal(t, other, next[0], "another controller's entry stays as it is")
	assert.Equal(t, web, next[1].ParentRef)
	acc := meta.FindStatusCondition(next[1].Conditions, "Accepted")
	assert.Equal(t, metav1.ConditionTrue, acc.Status)
	assert.Equal(t, then, acc.LastTransitionTime, "an unchanged condition of the same parent keeps its transition time")
	assert.Equal(t, int64(3), acc.ObservedGeneration)
	acc = meta.FindStatusCondition(next[2].Conditions, "Accepted")
	assert.Equal(t, metav1.ConditionFalse, acc.Status)
	assert.Equal(t, string(gwv1.RouteReasonNotAllowedByListeners), acc.Reason)
	assert.NotNil(t, meta.FindStatusCondition(next[2].Conditions, string(gwv1.RouteConditionResolvedRefs)))

	bad := Unserved{Problem: "rule 0: path match type RegularExpression is not supported"}
	next = RouteParents(old, parents, "team", 3, resolved, bad)
	acc = meta.FindStatusCondition(next[1].Conditions, "Accepted")
	assert.Equal(t, metav1.ConditionFalse, acc.Status, "a route of no rule the operator can serve refuses an attached parent")
	assert.Equal(t, string(gwv1.RouteReasonUnsupportedValue), acc.Reason)
	assert.Equal(t, string(gwv1.RouteReasonNotAllowedByListeners), meta.FindStatusCondition(next[2].Conditions, "Accepted").Reason,
		"a parent refused already keeps its own reason")

	assert.True(t, ParentsChanged(old, next))
	assert.Nil(t, meta.FindStatusCondition(next[1].Conditions, string(gwv1.RouteConditionPartiallyInvalid)), "PartiallyInvalid is for a route partly served")
	assert.False(t, ParentsChanged(next, RouteParents(next, parents, "team", 3, resolved, bad)),
		"a second turn with the same facts changes nothing")

	// Some rules served: accepted, the others dropped, as PartiallyInvalid
	// says; gone once every rule is served.
	bad.Partial = true
	next = RouteParents(next, parents, "team", 3, resolved, bad)
	acc = meta.FindStatusCondition(next[1].Conditions, "Accepted")
	assert.Equal(t, metav1.ConditionTrue, acc.Status, "a route with a rule served is accepted")
	pi := meta.FindStatusCondition(next[1].Conditions, string(gwv1.RouteConditionPartiallyInvalid))
	require.NotNil(t, pi)
	assert.Equal(t, metav1.ConditionTrue, pi.Status)
	assert.Equal(t, string(gwv1.RouteReasonUnsupportedValue), pi.Reason)
	assert.True(t, strings.HasPrefix(pi.Message, "Dropped Rule 0: path match type RegularExpression"), pi.Message)
	assert.Nil(t, meta.FindStatusCondition(next[2].Conditions, string(gwv1.RouteConditionPartiallyInvalid)), "not on a parent that refuses the route")
	next = RouteParents(next, parents, "team", 3, resolved, Unserved{})
	assert.Nil(t, meta.FindStatusCondition(next[1].Conditions, string(gwv1.RouteConditionPartiallyInvalid)), "every rule served")
	assert.False(t, ParentsChanged(nil, []gwv1.RouteParentStatus{}))
}

func TestSameParentRef(t *testing.T) {
	a := gwv1.ParentReference{Name: "Web", Port: ptr(gwv1.PortNumber(80))}
	assert.True(t, SameParentRef(a, gwv1.ParentReference{Name: "web", Namespace: ptr(gwv1.Namespace("team")), Port: ptr(gwv1.PortNumber(80))}, "team"))
	assert.False(t, SameParentRef(a, gwv1.ParentReference{Name: "web", Port: ptr(gwv1.PortNumber(8080))}, "team"))
	assert.False(t, SameParentRef(a, gwv1.ParentReference{Name: "web", SectionName: ptr(gwv1.SectionName("http")), Port: ptr(gwv1.PortNumber(80))}, "team"))
}
