package gateway

import (
	"crypto/tls"
	"crypto/x509"

	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// CertificateClaim is an HTTPS listener that asks the edge to serve a
// certificate of its certificateRefs for its host.
type CertificateClaim struct {
	Gateway   types.NamespacedName
	Listener  string
	Namespace string
	// Cert is the first certificate of the listener's certificateRefs
	// whose leaf names the host; nil when none does.
	Cert *Certificate
}

// CertificateClaims are the claims of each host: every programmed HTTPS
// listener with certificateRefs, of gws (oldest first, Served) as
// evaluated, the oldest Gateway's first, then in listener order; a
// listener without a hostname claims the Gateway's own address. The edge
// serves one certificate per host: the controller sets the one of the
// namespace that holds the host.
func CertificateClaims(gws []*gwv1.Gateway, evaluated Gateways) map[string][]CertificateClaim {
	out := map[string][]CertificateClaim{}
	for _, gw := range gws {
		key := types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}
		for _, l := range evaluated[key].Listeners {
			if l.Protocol != gwv1.HTTPSProtocolType || !l.Programmed || l.Host == "" || len(l.Certs) == 0 {
				continue
			}
			cert := certificateFor(l.Host, l.Certs)
			if l.AnyHost {
				// Clients reach the address by names the Gateway does
				// not know: its first certificate is served, as an
				// in-cluster Gateway serves it for any name.
				cert = &l.Certs[0]
			}
			out[l.Host] = append(out[l.Host], CertificateClaim{Gateway: key, Listener: l.Name, Namespace: gw.Namespace, Cert: cert})
		}
	}
	return out
}

// certificateFor is the first of certs whose leaf names host.
func certificateFor(host string, certs []Certificate) *Certificate {
	for i := range certs {
		pair, err := tls.X509KeyPair(certs[i].CertPEM, certs[i].KeyPEM)
		if err != nil {
			continue
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err == nil && leaf.VerifyHostname(host) == nil {
			return &certs[i]
		}
	}
	return nil
}

// NotProgrammed marks an accepted listener not programmed, saying why:
// its certificate is not what the edge serves for its host.
func (l *Listener) NotProgrammed(gen int64, msg string) {
	l.Programmed = false
	c := cond(string(gwv1.ListenerConditionProgrammed), string(gwv1.ListenerReasonInvalid), false, gen, msg)
	for i := range l.Conditions {
		if l.Conditions[i].Type == c.Type {
			l.Conditions[i] = c
			return
		}
	}
	l.Conditions = append(l.Conditions, c)
}
