package hosttunnel

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
)

// accessPolicy picks the AccessPolicy that guards a host: the one its
// owner namespace attaches, by the annotation k8s.tuna.am/access-policy
// of an Ingress with a rule for the host or by an ExtensionRef filter of
// an HTTPRoute on it, the oldest first. Another namespace's attachment,
// or a second policy of the owner's, is refused with a Warning event on
// the object, once per change. owner "" (a key of an older controller)
// takes none: the controller issues such keys again, with the owner.
func (r *Reconciler) accessPolicy(host, owner string, ings []*networkingv1.Ingress, routes []*gwv1.HTTPRoute) string {
	type attachment struct {
		obj  client.Object
		kind string
		name string
	}
	var all []attachment
	for _, ing := range ings {
		if name := ing.Annotations[tunav1.AnnotationAccessPolicy]; name != "" {
			all = append(all, attachment{ing, "Ingress", name})
		}
	}
	for _, rt := range routes {
		if name := gateway.AccessPolicyOf(rt); name != "" {
			all = append(all, attachment{rt, "HTTPRoute", name})
		}
	}
	chosen := ""
	for _, a := range all {
		var refusal string
		switch {
		case a.obj.GetNamespace() != owner:
			refusal = fmt.Sprintf("access policy %s is not attached to host %s: only the host's owner namespace %s may attach one", a.name, host, owner)
			if owner == "" {
				refusal = fmt.Sprintf("access policy %s is not attached to host %s yet: waiting for the controller to name the host's owner namespace", a.name, host)
			}
		case chosen != "" && a.name != chosen:
			refusal = fmt.Sprintf("access policy %s is not attached to host %s: an older %s of the namespace attaches %s, which guards the host", a.name, host, a.kind, chosen)
		default:
			chosen = a.name
		}
		r.tellAccess(a.obj, host, refusal)
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
