package gateway

import (
	"crypto/tls"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Certificate is one certificate an HTTPS listener names in
// tls.certificateRefs, read from its Secret.
type Certificate struct {
	Namespace, Name string
	CertPEM, KeyPEM []byte
}

// CertVerdict is whether a listener's certificateRefs resolve: each a
// Secret of type kubernetes.io/tls with a certificate and key that pair,
// in the Gateway's namespace or in one whose ReferenceGrant lets the
// Gateway's namespace refer to it. Reason is the listener's ResolvedRefs
// reason when they do not.
type CertVerdict struct {
	OK      bool
	Reason  gwv1.ListenerConditionReason
	Message string
	Certs   []Certificate
}

// SecretLookup reads a Secret by namespace and name: nil and no error
// when it does not exist, ErrSecretForbidden when the reader may not read
// it, another error for a failure worth retrying.
type SecretLookup func(namespace, name string) (*corev1.Secret, error)

// ErrSecretForbidden: the operator may not read the Secret (its RBAC
// covers the watched namespaces only).
var ErrSecretForbidden = errors.New("the operator may not read this Secret: it reads Secrets only in the namespaces it watches")

// ResolveCertificateRefs checks the certificateRefs of listener l of a
// Gateway in namespace ns, in order; the first that does not resolve
// decides the verdict. A listener without certificateRefs resolves with no
// certificates (TLS ends with the edge's own).
func ResolveCertificateRefs(ns string, l gwv1.Listener, grants []gwv1.ReferenceGrant, secret SecretLookup) (CertVerdict, error) {
	if l.TLS == nil || len(l.TLS.CertificateRefs) == 0 {
		return CertVerdict{OK: true}, nil
	}
	v := CertVerdict{OK: true}
	for i, ref := range l.TLS.CertificateRefs {
		refNS := ns
		if ref.Namespace != nil {
			refNS = string(*ref.Namespace)
		}
		what := fmt.Sprintf("certificateRefs[%d] (%s/%s)", i, refNS, ref.Name)
		invalid := func(msg string) (CertVerdict, error) {
			return CertVerdict{Reason: gwv1.ListenerReasonInvalidCertificateRef, Message: what + ": " + msg}, nil
		}
		if (ref.Group != nil && *ref.Group != "") || (ref.Kind != nil && *ref.Kind != "Secret") {
			return invalid("only a core Secret can hold the listener's certificate")
		}
		if refNS != ns && !GrantedTo(grants, "Gateway", ns, "Secret", refNS, string(ref.Name)) {
			return CertVerdict{Reason: gwv1.ListenerReasonRefNotPermitted, Message: fmt.Sprintf(
				"%s: the Secret is in another namespace and no ReferenceGrant there lets Gateways of namespace %s refer to it", what, ns)}, nil
		}
		s, err := secret(refNS, string(ref.Name))
		switch {
		case errors.Is(err, ErrSecretForbidden):
			return invalid(err.Error())
		case err != nil:
			return CertVerdict{}, err
		}
		switch {
		case s == nil:
			return invalid("the Secret does not exist")
		case s.Type != corev1.SecretTypeTLS:
			return invalid(fmt.Sprintf("the Secret is of type %q: it must be of type kubernetes.io/tls", s.Type))
		}
		if _, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]); err != nil {
			return invalid(fmt.Sprintf("tls.crt and tls.key are not a PEM certificate and its key: %v", err))
		}
		v.Certs = append(v.Certs, Certificate{Namespace: refNS, Name: string(ref.Name),
			CertPEM: s.Data[corev1.TLSCertKey], KeyPEM: s.Data[corev1.TLSPrivateKeyKey]})
	}
	return v, nil
}
