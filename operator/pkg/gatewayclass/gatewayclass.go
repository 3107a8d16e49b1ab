// Package gatewayclass says what of the Gateway API is the operator's: its
// GatewayClasses (their controllerName, the class the chart may create)
// and the kinds it needs served before it turns Gateway support on. The
// controller, the agent and the CLI share it; it imports nothing of the
// operator, so the CLI links no part of the Gateway API's translation.
package gatewayclass

import (
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ControllerName is the controllerName of the operator's GatewayClasses.
const ControllerName gwv1.GatewayController = "k8s.tuna.am/gateway-controller"

// ClassName is the name of the GatewayClass the chart may create.
const ClassName = "tuna"

// Ours reports whether gc is one of this controller's classes.
func Ours(gc *gwv1.GatewayClass) bool {
	return gc.Spec.ControllerName == ControllerName && gc.DeletionTimestamp.IsZero()
}

// Kinds are the Gateway API kinds (gateway.networking.k8s.io/v1) the
// operator needs before it serves Gateways; TCPRoute and BackendTLSPolicy
// are served too once their CRDs are installed. The chart installs none
// of them, and controller-runtime cannot watch a kind the API server does
// not serve, so the components turn each on when discovery shows it.
func Kinds() []string { return []string{"GatewayClass", "Gateway", "HTTPRoute", "ReferenceGrant"} }

// The optional kinds beyond Kinds.
const (
	KindTCPRoute         = "TCPRoute"
	KindBackendTLSPolicy = "BackendTLSPolicy"
)
