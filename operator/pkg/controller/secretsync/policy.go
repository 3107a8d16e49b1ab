package secretsync

import (
	"fmt"
	"strings"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// NamespacePlaceholder in Policy.Prefix stands for the SecretSync's
// namespace.
const NamespacePlaceholder = "{namespace}"

// Policy is what the operator's own key may be used for. A SecretSync with
// spec.apiKeySecretRef brings its own key, and the edge alone decides what
// that key reads (its scopes and secret prefix).
type Policy struct {
	// OperatorKey lets SecretSyncs without apiKeySecretRef use the
	// operator's key.
	OperatorKey bool
	// Prefix is what every edge secret name taken with the operator's key
	// must start with; NamespacePlaceholder is replaced by the namespace.
	// The default, "{namespace}/", keeps each namespace to its own
	// secrets; "" lets any namespace read any secret the key sees.
	Prefix string
}

// DefaultPolicy keeps each namespace to edge secrets named <namespace>/....
var DefaultPolicy = Policy{OperatorKey: true, Prefix: NamespacePlaceholder + "/"}

// Allowed says why a SecretSync in namespace may not take source with the
// operator's key, or nil when it may.
func (p Policy) Allowed(namespace string, source tunav1.SecretSyncSource) error {
	if !p.OperatorKey {
		return fmt.Errorf("this operator does not sync secrets with its own key (chart: secretSync.operatorKey=false): set spec.apiKeySecretRef to a Secret holding an API key with the secrets:read scope")
	}
	want := strings.ReplaceAll(p.Prefix, NamespacePlaceholder, namespace)
	asked, what := source.Name, "source.name"
	if asked == "" {
		asked, what = source.Prefix, "source.prefix"
	}
	if strings.HasPrefix(asked, want) {
		return nil
	}
	return fmt.Errorf("with the operator's key, namespace %s may only sync edge secrets named %s... (chart: secretSync.prefix), and %s is %q: name the secret %s<name> on the edge, or set spec.apiKeySecretRef to your own key",
		namespace, want, what, asked, want)
}
