package gateway

import (
	"fmt"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/upstream"
)

// BackendTLS turns the BackendTLSPolicy that targets a Service (and, when
// the policy names one, its port's name) into the upstream TLS options a
// Tunnel's spec.upstream.tls gives: the CA bundle of a ConfigMap or
// Secret of the policy's namespace (key ca.crt) or the system's roots, and
// the hostname the certificate must hold. found is false when no policy
// targets the Service; problem says why a policy cannot be used.
func BackendTLS(policies []gwv1.BackendTLSPolicy, namespace, service, portName string) (o upstream.TLSOptions, found bool, problem string) {
	for _, p := range policies {
		if p.Namespace != namespace || !p.DeletionTimestamp.IsZero() {
			continue
		}
		for _, t := range p.Spec.TargetRefs {
			if t.Group != "" || t.Kind != "Service" || string(t.Name) != service {
				continue
			}
			if t.SectionName != nil && string(*t.SectionName) != portName {
				continue
			}
			o, problem = tlsOptions(p)
			return o, true, problem
		}
	}
	return o, false, ""
}

func tlsOptions(p gwv1.BackendTLSPolicy) (upstream.TLSOptions, string) {
	v := p.Spec.Validation
	o := upstream.TLSOptions{ServerName: string(v.Hostname)}
	switch {
	case len(v.CACertificateRefs) > 1:
		return o, fmt.Sprintf("BackendTLSPolicy %s names %d CA certificate refs: tuna uses one bundle, so merge them into one", p.Name, len(v.CACertificateRefs))
	case len(v.CACertificateRefs) == 1:
		ref := v.CACertificateRefs[0]
		if ref.Group != "" {
			return o, fmt.Sprintf("BackendTLSPolicy %s: CA certificate ref %s/%s is not a ConfigMap or Secret", p.Name, ref.Kind, ref.Name)
		}
		switch ref.Kind {
		case "ConfigMap":
			o.CA = &upstream.CARef{Kind: upstream.KindConfigMap, Name: string(ref.Name)}
		case "Secret":
			o.CA = &upstream.CARef{Kind: upstream.KindSecret, Name: string(ref.Name)}
		default:
			return o, fmt.Sprintf("BackendTLSPolicy %s: CA certificate ref %s/%s is not a ConfigMap or Secret", p.Name, ref.Kind, ref.Name)
		}
	case v.WellKnownCACertificates != nil && *v.WellKnownCACertificates == gwv1.WellKnownCACertificatesSystem:
		// The system's roots: no bundle.
	default:
		return o, fmt.Sprintf("BackendTLSPolicy %s sets neither caCertificateRefs nor wellKnownCACertificates: System", p.Name)
	}
	return o, ""
}
