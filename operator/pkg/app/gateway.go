package app

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	gatewayctl "code.tuna.am/tuna/k8s-operator/operator/pkg/controller/gateway"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
)

// setupGateways starts the Gateway API status controller. It runs only
// when the API server serves the Gateway API's kinds (gatewaysInstalled):
// the chart does not install those CRDs;
// without them the operator says so once and runs without Gateway
// support, since controller-runtime fails to start a watch of an unknown
// kind. Installing the CRDs later takes a restart of the controller.
func setupGateways(mgr ctrl.Manager, namespaces []string) error {
	r := &gatewayctl.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespaces: namespaces,
		TCPRoutes: gateway.TCPRoutesInstalled(mgr.GetRESTMapper())}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the Gateway status controller: %w", err)
	}
	return nil
}

// gatewaysInstalled checks for the Gateway API's CRDs and logs, once per
// component start, when they are missing.
func gatewaysInstalled(mgr ctrl.Manager) bool {
	if gateway.Installed(mgr.GetRESTMapper()) {
		return true
	}
	ctrl.Log.WithName("gateway").Info("the Gateway API CRDs (gateway.networking.k8s.io) are not installed; Gateway support is off until they are and the component restarts")
	return false
}
