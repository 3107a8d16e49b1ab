package gateway

import (
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// An HTTPRoute attaches an AccessPolicy of its namespace with an
// ExtensionRef filter: {group: k8s.tuna.am, kind: AccessPolicy, name}.
// The edge enforces policies per host, so the filter, in any rule,
// guards the route's hosts as a whole; the policy's own pathPrefixes say
// which paths need what. Only the namespace that owns a host may attach a
// policy to it.
const (
	AccessPolicyGroup = "k8s.tuna.am"
	AccessPolicyKind  = "AccessPolicy"
)

// IsAccessPolicy reports whether an ExtensionRef names an AccessPolicy.
func IsAccessPolicy(ref *gwv1.LocalObjectReference) bool {
	return ref != nil && string(ref.Group) == AccessPolicyGroup && string(ref.Kind) == AccessPolicyKind
}

// AccessPolicyOf is the AccessPolicy a route attaches ("" for none): the
// first ExtensionRef filter that names one.
func AccessPolicyOf(rt *gwv1.HTTPRoute) string {
	for _, rule := range rt.Spec.Rules {
		for _, f := range rule.Filters {
			if f.Type == gwv1.HTTPRouteFilterExtensionRef && IsAccessPolicy(f.ExtensionRef) {
				return string(f.ExtensionRef.Name)
			}
		}
	}
	return ""
}
