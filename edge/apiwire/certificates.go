package apiwire

import "time"

// PutCertificate is the body of PUT /v1/certificates/{host}: a host's own
// certificate, which the edge's HTTPS listener serves for it instead of
// the edge's.
type PutCertificate struct {
	// ChainPEM is the certificate chain in PEM, leaf first; the leaf must
	// name the host and be valid now.
	ChainPEM string `json:"chain_pem"`
	// KeyPEM is the leaf's private key in PEM. The edge stores it sealed
	// with its secrets keyring and never returns it.
	KeyPEM string `json:"key_pem"`
}

// Certificate is what the edge holds for a host's own certificate (never
// its key).
type Certificate struct {
	Host      string    `json:"host"`
	Owner     string    `json:"owner"`
	DNSNames  []string  `json:"dns_names,omitempty"`
	NotBefore time.Time `json:"not_before"`
	NotAfter  time.Time `json:"not_after"`
}
