package hosttunnel

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

// accessPolicy picks the AccessPolicy that guards a host (see
// pubhost.AccessInForce, which the AccessPolicy controller reports from):
// the one its owner namespace attaches, by the annotation
// k8s.tuna.am/access-policy of an Ingress with a rule for the host or by
// an ExtensionRef filter of an HTTPRoute on it, the oldest first. Another
// namespace's attachment, or a second policy of the owner's, is refused
// with a Warning event on the object, once per change. owner "" (a key of
// an older controller) takes none: the controller issues such keys again,
// with the owner. A Domain's policy, which wins on the edge, is the
// edge's to apply: the agent binds what the Ingresses and routes ask.
func (r *Reconciler) accessPolicy(host, owner string, ings []*networkingv1.Ingress, routes []*gwv1.HTTPRoute) string {
	var claims []pubhost.AccessClaim
	for _, ing := range ings {
		if name := ing.Annotations[tunav1.AnnotationAccessPolicy]; name != "" {
			claims = append(claims, pubhost.AccessClaim{Obj: ing, Kind: "Ingress", Policy: name})
		}
	}
	for _, rt := range routes {
		if name := gateway.AccessPolicyOf(rt); name != "" {
			claims = append(claims, pubhost.AccessClaim{Obj: rt, Kind: "HTTPRoute", Policy: name})
		}
	}
	chosen, verdicts := pubhost.AccessInForce(host, owner, "", claims)
	for _, v := range verdicts {
		r.tellAccess(v.Obj, host, v.Refusal)
	}
	return chosen
}

// tellAccess records a refusal of an attachment once per change.
func (r *Reconciler) tellAccess(obj client.Object, host, refusal string) {
	key := string(obj.GetUID()) + "/" + host
	if prev, ok := r.toldAccess.Swap(key, refusal); (ok && prev == refusal) || (!ok && refusal == "") {
		return
	}
	if refusal != "" {
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, "AccessPolicyRefused", "Protect", "%s", refusal)
	}
}
