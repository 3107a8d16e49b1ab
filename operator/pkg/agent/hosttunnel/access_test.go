package hosttunnel

import (
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

func annotated(ns, name, policy string, age time.Duration) *networkingv1.Ingress {
	return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name),
		CreationTimestamp: metav1.NewTime(time.Unix(1e9, 0).Add(-age)),
		Annotations:       map[string]string{tunav1.AnnotationAccessPolicy: policy}}}
}

func routeWith(ns, name, policy string) *gwv1.HTTPRoute {
	return &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("rt/" + ns + "/" + name),
		CreationTimestamp: metav1.NewTime(time.Unix(1e9, 0))},
		Spec: gwv1.HTTPRouteSpec{Rules: []gwv1.HTTPRouteRule{{Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterExtensionRef,
			ExtensionRef: &gwv1.LocalObjectReference{Group: "k8s.tuna.am", Kind: "AccessPolicy", Name: gwv1.ObjectName(policy)}}}}}}}
}

// Only the host's owner namespace attaches a policy, by an Ingress
// annotation or an HTTPRoute's ExtensionRef; the others are refused with
// one event each, and a second policy of the owner too.
func TestAccessPolicyOfAHost(t *testing.T) {
	rec := events.NewFakeRecorder(20)
	r := &Reconciler{Recorder: rec}
	ings := []*networkingv1.Ingress{annotated("a", "site", "guard", 2*time.Hour), annotated("b", "grab", "open", time.Hour)}
	routes := []*gwv1.HTTPRoute{routeWith("a", "api", "other"), routeWith("c", "x", "open")}
	for range 2 { // twice: the events are told once
		if got := r.accessPolicy("h.example.com", "a", ings, routes); got != "guard" {
			t.Fatalf("the host's policy is %q, want the owner's oldest, guard", got)
		}
	}
	close(rec.Events)
	var msgs []string
	for e := range rec.Events {
		msgs = append(msgs, e)
	}
	if len(msgs) != 3 {
		t.Fatalf("events %q, want one per refused attachment", msgs)
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{"access policy open is not attached to host h.example.com: only the host's owner namespace a",
		"access policy other is not attached to host h.example.com: an older"} {
		if !strings.Contains(all, want) {
			t.Errorf("no event saying %q in\n%s", want, all)
		}
	}
	if got := (&Reconciler{Recorder: events.NewFakeRecorder(5)}).accessPolicy("h", "", ings, nil); got != "" {
		t.Errorf("a key Secret without the owner attaches %q", got)
	}
	if got := (&Reconciler{Recorder: events.NewFakeRecorder(5)}).accessPolicy("h", "c", nil, routes); got != "open" {
		t.Errorf("an HTTPRoute's ExtensionRef of the owner attaches %q, want open", got)
	}
}
