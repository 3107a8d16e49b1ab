package ingress

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

// Watch indexes Ingresses by host and has b watch what every controller of
// published hosts watches of Ingress: Ingress changes and IngressClass
// changes, each waking the hosts it concerns (alsoIngress: the Ingress's
// own request too, for a controller that writes its status).
func Watch(mgr ctrl.Manager, b *builder.Builder, alsoIngress bool) (*builder.Builder, error) {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &networkingv1.Ingress{}, pubhost.Index, Source.IndexHosts); err != nil {
		return nil, fmt.Errorf("indexing Ingresses by host: %w", err)
	}
	return b.Watches(&networkingv1.Ingress{}, Handler(mgr.GetClient(), alsoIngress), builder.WithPredicates(Changed)).
		Watches(&networkingv1.IngressClass{}, ClassHandler(mgr.GetClient(), alsoIngress)), nil
}
