package client

import (
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// Trust says how a client verifies the control API's TLS certificate. The
// edge serves a self-signed certificate by default, so a client pins it by
// fingerprint or trusts a CA bundle; with neither set the system roots
// verify the API as any HTTPS site.
type Trust struct {
	// Fingerprint pins the API's leaf certificate ("sha256:HEX"). The chain
	// and the host name are not checked then: the pin is the whole trust.
	Fingerprint string
	// CABundle is PEM: the API's certificate must chain to one of these
	// roots and name the host of the API URL. With Fingerprint set too,
	// both must hold.
	CABundle []byte
}

// IsZero reports whether neither a pin nor a CA bundle is set.
func (t Trust) IsZero() bool { return t.Fingerprint == "" && len(t.CABundle) == 0 }

// TLSConfig is the client TLS configuration for t; it fails on a malformed
// fingerprint or a bundle without certificates.
func (t Trust) TLSConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(t.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(t.CABundle) {
			return nil, errors.New("the edge API CA bundle holds no PEM certificate: give the PEM of the CA (or of the edge's certificate, `tuna-edge api-fingerprint -o pem`)")
		}
		cfg.RootCAs = pool
	}
	if t.Fingerprint == "" {
		return cfg, nil
	}
	want, err := apiwire.ParseFingerprint(t.Fingerprint)
	if err != nil {
		return nil, err
	}
	// A self-signed certificate has no chain to verify: the pin replaces
	// the usual checks, unless a CA bundle asks for them as well.
	cfg.InsecureSkipVerify = len(t.CABundle) == 0
	// VerifyConnection runs on resumed sessions too, unlike
	// VerifyPeerCertificate, so a resumption cannot skip the pin.
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the edge API sent no certificate")
		}
		got := apiwire.Fingerprint(cs.PeerCertificates[0].Raw)
		if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			return fmt.Errorf("edge API certificate fingerprint is %s, but %s is pinned: "+
				"run `tuna-edge api-fingerprint` on the edge and pin what it prints, or find what intercepts the connection", got, want)
		}
		return nil
	}
	return cfg, nil
}

// Transport is an HTTP transport that verifies the API as t says, with the
// defaults of http.DefaultTransport otherwise (proxy from the environment,
// HTTP/2, connection reuse).
func (t Trust) Transport() (*http.Transport, error) {
	cfg, err := t.TLSConfig()
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	// A custom TLS config turns off the automatic HTTP/2 upgrade.
	tr.ForceAttemptHTTP2 = true
	return tr, nil
}

// WithTrust verifies the API's certificate as t says. It replaces the HTTP
// client's transport; to wrap the transport (metrics), build it with
// Trust.Transport and pass a client with WithHTTPClient instead. A
// malformed t makes every call fail with the reason.
func WithTrust(t Trust) Option { return func(c *Client) { c.trust = &t } }
