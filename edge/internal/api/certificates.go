package api

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/auth"
	"code.tuna.am/tuna/k8s-operator/edge/internal/names"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
)

// Certificates keeps the certificates hosts' owners upload (the HTTPS
// listener's certs.Manager, which seals their keys with the secrets
// keyring and serves them while their owner holds the host).
type Certificates interface {
	PutOwned(host, owner string, chainPEM, keyPEM []byte) error
	Stored(host string) (store.TLSCert, error)
	Remove(host string) error
}

func (s *Server) certificateRoutes() {
	s.handle("PUT /v1/certificates/{host}", writeAccess, s.putCertificate)
	s.handle("GET /v1/certificates/{host}", writeAccess, s.getCertificate)
	s.handle("DELETE /v1/certificates/{host}", writeAccess, s.deleteCertificate)
}

// certificateActor reads the host a certificate call names and checks
// that the caller acts for its holder: only the owner of a host sets,
// reads or removes its certificate (an administrator's full key may too).
// A host's holder is its Domain's owner or, for a claimed host, the owner
// whose keys claimed it; an owner it is shared with may serve it but not
// set its certificate.
func (s *Server) certificateActor(r *http.Request, p *auth.Principal) (string, actor, error) {
	host, err := s.certificateHost(r.PathValue("host"))
	if err != nil {
		return "", actor{}, err
	}
	a, err := actorOf(r, p)
	if err != nil {
		return "", a, err
	}
	holder, held, err := s.st.HostHolder(host)
	if err != nil {
		return "", a, fmt.Errorf("reading who holds %s: %w", host, err)
	}
	if !held {
		return "", a, fail(http.StatusNotFound, apiwire.CodeNotFound,
			"host %s is held by no owner: reserve it (POST /v1/domains) or issue a tunnel key for it first", host)
	}
	if err := a.mayManage(host, store.Ownership{Owner: holder}); err != nil {
		return "", a, err
	}
	return host, a, nil
}

// certificateHost reads the host of a certificate call: a domain, or one
// of the edge's Gateway addresses, whose HTTPS listener serves the
// certificate of the address's holder.
func (s *Server) certificateHost(raw string) (string, error) {
	if ip, err := netip.ParseAddr(raw); err == nil {
		if !slices.Contains(s.cfg.GatewayAddresses, ip) {
			return "", fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
				"host %s is an address but not one of the edge's Gateway addresses (GET /v1/edge lists them)", raw)
		}
		return ip.String(), nil
	}
	host := names.Normalize(raw)
	if err := names.CheckHost(host); err != nil {
		return "", fail(http.StatusBadRequest, apiwire.CodeInvalidDomain, "host: %v", err)
	}
	return host, nil
}

// gatewayAddress reports whether host is one of the edge's Gateway
// addresses. Their certificate need not name them: clients reach a
// Gateway address by names of their own DNS, which the edge does not
// know (the Gateway API's listener without a hostname), so the name is
// the holder's concern, as it is on an in-cluster Gateway.
func (s *Server) gatewayAddress(host string) bool {
	ip, err := netip.ParseAddr(host)
	return err == nil && slices.Contains(s.cfg.GatewayAddresses, ip)
}

func (s *Server) putCertificate(r *http.Request, p *auth.Principal) (int, any, error) {
	host, a, err := s.certificateActor(r, p)
	if err != nil {
		return 0, nil, err
	}
	var in apiwire.PutCertificate
	if err := decode(r, &in); err != nil {
		return 0, nil, err
	}
	pair, err := tls.X509KeyPair([]byte(in.ChainPEM), []byte(in.KeyPEM))
	if err != nil {
		return 0, nil, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
			"chain_pem and key_pem are not a PEM certificate chain and its private key: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return 0, nil, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest, "the leaf certificate does not parse: %v", err)
	}
	if err := leaf.VerifyHostname(host); err != nil && !s.gatewayAddress(host) {
		return 0, nil, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
			"the certificate is not for %s (it names %v): a client would refuse it", host, leaf.DNSNames)
	}
	if now := s.cfg.Now(); now.Before(leaf.NotBefore) || !now.Before(leaf.NotAfter) {
		return 0, nil, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
			"the certificate is valid from %s to %s, not now", leaf.NotBefore.UTC().Format("2006-01-02T15:04:05Z"), leaf.NotAfter.UTC().Format("2006-01-02T15:04:05Z"))
	}
	owner := a.owner
	if owner == "" {
		owner, _, _ = s.st.HostHolder(host)
	}
	if err := s.cfg.Certificates.PutOwned(host, owner, []byte(in.ChainPEM), []byte(in.KeyPEM)); err != nil {
		return 0, nil, fmt.Errorf("storing the certificate of %s: %w", host, err)
	}
	return http.StatusOK, certificateOut(host, owner, leaf), nil
}

func (s *Server) getCertificate(r *http.Request, p *auth.Principal) (int, any, error) {
	host, _, err := s.certificateActor(r, p)
	if err != nil {
		return 0, nil, err
	}
	rec, err := s.ownCertificate(host)
	if err != nil {
		return 0, nil, err
	}
	leaf, err := leafOf(rec.ChainPEM)
	if err != nil {
		return 0, nil, fmt.Errorf("the stored certificate of %s: %w", host, err)
	}
	return http.StatusOK, certificateOut(host, rec.Owner, leaf), nil
}

func (s *Server) deleteCertificate(r *http.Request, p *auth.Principal) (int, any, error) {
	host, _, err := s.certificateActor(r, p)
	if err != nil {
		return 0, nil, err
	}
	if _, err := s.ownCertificate(host); err != nil {
		return 0, nil, err
	}
	if err := s.cfg.Certificates.Remove(host); err != nil {
		return 0, nil, fmt.Errorf("removing the certificate of %s: %w", host, err)
	}
	return http.StatusNoContent, nil, nil
}

// ownCertificate is the certificate an owner uploaded for host: the
// edge's own (ACME's, an operator's) are not the API's to show or remove.
func (s *Server) ownCertificate(host string) (store.TLSCert, error) {
	rec, err := s.cfg.Certificates.Stored(host)
	if errors.Is(err, store.ErrNotFound) || (err == nil && rec.Owner == "") {
		return rec, notFound("certificate of host", host)
	}
	if err != nil {
		return rec, fmt.Errorf("reading the certificate of %s: %w", host, err)
	}
	return rec, nil
}

// leafOf parses the first certificate of a PEM chain.
func leafOf(chainPEM []byte) (*x509.Certificate, error) {
	for rest := chainPEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no certificate in the chain")
		}
		if block.Type == "CERTIFICATE" {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}

func certificateOut(host, owner string, leaf *x509.Certificate) apiwire.Certificate {
	return apiwire.Certificate{Host: host, Owner: owner, DNSNames: leaf.DNSNames, NotBefore: leaf.NotBefore.UTC(), NotAfter: leaf.NotAfter.UTC()}
}
