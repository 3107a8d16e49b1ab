package gateway

import (
	"slices"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"
)

// Features are the Gateway API features the operator declares in its
// GatewayClasses' status.supportedFeatures, where the conformance suite
// reads them: the core of the GATEWAY-HTTP profile and each extended
// feature that passes the suite on a real node (tests/node/conformance).
// docs/gateway-api.md lists the others and why they are not claimed.
var Features = []features.FeatureName{
	features.SupportGateway,
	features.SupportHTTPRoute,
	features.SupportReferenceGrant,
	features.SupportHTTPRouteQueryParamMatching,
	features.SupportHTTPRouteMethodMatching,
	features.SupportHTTPRouteResponseHeaderModification,
	features.SupportHTTPRoutePortRedirect,
	features.SupportHTTPRouteSchemeRedirect,
	features.SupportHTTPRoutePathRedirect,
	features.SupportHTTPRouteHostRewrite,
	features.SupportHTTPRoutePathRewrite,
	features.SupportHTTPRouteBackendProtocolWebSocket,
}

// SupportedFeatures is Features as status.supportedFeatures wants them:
// sorted by name, each once.
func SupportedFeatures() []gwv1.SupportedFeature {
	names := make([]string, 0, len(Features))
	for _, f := range Features {
		names = append(names, string(f))
	}
	slices.Sort(names)
	names = slices.Compact(names)
	out := make([]gwv1.SupportedFeature, 0, len(names))
	for _, n := range names {
		out = append(out, gwv1.SupportedFeature{Name: gwv1.FeatureName(n)})
	}
	return out
}
