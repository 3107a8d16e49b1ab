package gateway

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

// WatchHosts indexes Gateways by host and has ctl watch what every
// controller of published hosts watches of the Gateway API: GatewayClass
// changes (every host) and Gateway changes (the hosts they concern), then
// the sources more of its own. indexed runs once the index is there,
// before the watches, whose first lists wake the hosts of the Gateways
// that exist.
func WatchHosts(mgr ctrl.Manager, ctl controller.Controller, indexed func(), more ...source.Source) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &gwv1.Gateway{}, pubhost.Index, Source.IndexHosts); err != nil {
		return fmt.Errorf("indexing Gateways by host: %w", err)
	}
	indexed()
	c := mgr.GetCache()
	srcs := append([]source.Source{
		source.Kind(c, client.Object(&gwv1.GatewayClass{}), AllHostsHandler(mgr.GetClient()), predicate.GenerationChangedPredicate{}),
		source.Kind(c, client.Object(&gwv1.Gateway{}), HostHandler(mgr.GetClient()), HostsChanged()),
	}, more...)
	for _, src := range srcs {
		if err := ctl.Watch(src); err != nil {
			return fmt.Errorf("watching the Gateway API: %w", err)
		}
	}
	return nil
}
