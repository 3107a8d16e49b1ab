package hosttunnel

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/keysecret"
)

// tenants keeps the Ingresses of the namespaces the host's key Secret
// names (the host's owner and those it shares the host with), so an
// Ingress of another namespace can neither add routes to the host nor
// replace its default backend. The controller decides who they are from
// the edge's reservation.
// It also returns those namespaces (nil: any), for the host's Gateways.
func (r *Reconciler) tenants(ctx context.Context, host string, served []*networkingv1.Ingress) ([]*networkingv1.Ingress, []string, error) {
	var secret corev1.Secret
	key := types.NamespacedName{Namespace: r.Namespace, Name: keysecret.HostName(host)}
	if err := r.Reader.Get(ctx, key, &secret); err != nil {
		// No Secret: no key, so nothing is published whatever the routes.
		return served, nil, client.IgnoreNotFound(err)
	}
	allowed := keysecret.Read(&secret).Namespaces
	if allowed == nil {
		return served, nil, nil
	}
	out := served[:0:0]
	for _, ing := range served {
		if slices.Contains(allowed, ing.Namespace) {
			out = append(out, ing)
		}
	}
	return out, allowed, nil
}
