package app

import (
	"fmt"

	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/apiwatch"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/accesspolicy"
	gatewayctl "code.tuna.am/tuna/k8s-operator/operator/pkg/controller/gateway"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/hostkey"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gatewayclass"
)

// The optional APIs: the chart does not install the Gateway API's CRDs,
// and controller-runtime cannot watch a kind the API server does not
// serve, so what uses them is turned on when discovery shows them, at
// start or later (apiwatch), without a restart.
const (
	apiGateway          = "the Gateway API"
	apiTCPRoute         = "the Gateway API's TCPRoute"
	apiBackendTLSPolicy = "the Gateway API's BackendTLSPolicy"
)

// gatewayAPI is an optional API of the Gateway API's group: the core kinds
// and the extra ones, so that an extra API is turned on after the core.
func gatewayAPI(name string, extra []string, off string, serve func() error) apiwatch.API {
	return apiwatch.API{Name: name, GroupVersion: gwv1.GroupVersion, Kinds: append(gatewayclass.Kinds(), extra...), Off: off, Serve: serve}
}

// watchControllerAPIs turns on the controller's part of the Gateway API:
// the keys of Gateway hosts, the status controller, then TCPRoutes.
// certs is the edge API that takes HTTPS listeners' certificates.
// policies learn of the HTTPRoutes that name them.
func watchControllerAPIs(mgr ctrl.Manager, o Common, keys *hostkey.Reconciler, policies *accesspolicy.Reconciler, certs edgeapi.Certificates) error {
	status := &gatewayctl.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespaces: o.WatchNamespaces, Info: keys.Info,
		Certificates: &edgeapi.HostCertificates{API: certs}, ClusterID: keys.ClusterID}
	return watchAPIs(mgr, o,
		gatewayAPI(apiGateway, nil, "Gateways and HTTPRoutes are not served", func() error {
			if err := keys.ServeGateways(mgr); err != nil {
				return err
			}
			if err := status.SetupWithManager(mgr); err != nil {
				return fmt.Errorf("setting up the Gateway status controller: %w", err)
			}
			return policies.ServeGateways(mgr)
		}),
		gatewayAPI(apiTCPRoute, []string{gatewayclass.KindTCPRoute}, "TCPRoutes are not served",
			func() error { return status.ServeTCPRoutes(mgr) }))
}

// watchAPIs checks the optional APIs now, serving those installed, and
// adds the watcher that serves the others once they are.
func watchAPIs(mgr ctrl.Manager, o Common, apis ...apiwatch.API) error {
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("creating the discovery client: %w", err)
	}
	w := &apiwatch.Watcher{Discovery: dc, Interval: o.APIDiscoveryInterval, Log: ctrl.Log.WithName("apis"), APIs: apis}
	if err := w.Check(); err != nil {
		return err
	}
	if err := mgr.Add(w); err != nil {
		return fmt.Errorf("adding the optional API watcher: %w", err)
	}
	return nil
}
