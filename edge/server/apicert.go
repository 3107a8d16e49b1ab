package server

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/internal/atomicfile"
)

// apiCertFile holds the control API's generated certificate and its ECDSA
// key (PEM, mode 0600) in the data directory. It is made on the first start
// without APITLSCert and reused afterwards, so the fingerprint that clients
// pin survives restarts.
const apiCertFile = "api-tls.pem"

// apiCertValidity is long because clients pin the certificate itself: a
// renewal changes the fingerprint, and every pinning client must be updated.
const apiCertValidity = 10 * 365 * 24 * time.Hour

// APICertPath is where the generated API certificate of dataDir lives.
func APICertPath(dataDir string) string { return filepath.Join(dataDir, apiCertFile) }

// apiTLS is the API's certificate and how it came about, for the start log.
type apiTLS struct {
	cert        tls.Certificate
	fingerprint string
	source      string // "file", "generated" or "reused"
	missing     []string
}

// loadAPITLS returns the API's certificate: the configured files, or the
// generated one of the data directory (made now when there is none).
func loadAPITLS(cfg *Config, now time.Time, log *slog.Logger) (*apiTLS, error) {
	if cfg.APITLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.APITLSCert, cfg.APITLSKey)
		if err != nil {
			return nil, fmt.Errorf("edge: loading API certificate: %w", err)
		}
		return &apiTLS{cert: cert, fingerprint: apiwire.Fingerprint(cert.Certificate[0]), source: "file"}, nil
	}
	hosts := apiCertHosts(cfg)
	path := APICertPath(cfg.DataDir)
	cert, err := readAPICert(path, log)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	case now.After(cert.Leaf.NotAfter):
		log.Warn("the generated API certificate has expired; making a new one: update every client's pinned fingerprint",
			"file", path, "old_fingerprint", apiwire.Fingerprint(cert.Certificate[0]))
	default:
		return &apiTLS{cert: *cert, fingerprint: apiwire.Fingerprint(cert.Certificate[0]), source: "reused",
			missing: uncovered(cert.Leaf, hosts)}, nil
	}
	pemData, err := newAPICert(hosts, now)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(path, pemData, 0o600); err != nil {
		return nil, fmt.Errorf("edge: storing the API certificate: %w", err)
	}
	fresh, err := parseAPICert(pemData)
	if err != nil {
		return nil, err
	}
	return &apiTLS{cert: *fresh, fingerprint: apiwire.Fingerprint(fresh.Certificate[0]), source: "generated"}, nil
}

// apiCertHosts are the names a generated certificate covers: loopback, the
// base domain, the advertised SSH host, the API's listen host and the
// configured extra names, so that a client trusting it as a CA bundle can
// verify the host name as well.
func apiCertHosts(cfg *Config) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1", cfg.BaseDomain}
	for _, addr := range []string{cfg.SSHAdvertiseAddr, cfg.APIListen} {
		if h, _, err := net.SplitHostPort(addr); err == nil && h != "" {
			if ip := net.ParseIP(h); ip == nil || !ip.IsUnspecified() {
				hosts = append(hosts, h)
			}
		}
	}
	hosts = append(hosts, cfg.APICertHosts...)
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

func newAPICert(hosts []string, now time.Time) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("edge: generating the API key pair: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("edge: generating a serial number: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "tuna-edge control API"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(apiCertValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("edge: creating the API certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("edge: encoding the API key: %w", err)
	}
	var buf bytes.Buffer
	_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	_ = pem.Encode(&buf, &pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	return buf.Bytes(), nil
}

// readAPICert loads the generated certificate, tightening a file mode that
// lets others read the private key.
func readAPICert(path string, log *slog.Logger) (*tls.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("the API certificate's private key was readable by others; setting mode 0600", "file", path, "mode", fi.Mode().Perm().String())
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, fmt.Errorf("edge: restricting %s to mode 0600: %w", path, err)
		}
	}
	cert, err := parseAPICert(data)
	if err != nil {
		return nil, fmt.Errorf("edge: %s: %w (delete it to generate a new certificate; the fingerprint changes)", path, err)
	}
	return cert, nil
}

func parseAPICert(data []byte) (*tls.Certificate, error) {
	cert, err := tls.X509KeyPair(data, data)
	if err != nil {
		return nil, fmt.Errorf("reading the API certificate: %w", err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("parsing the API certificate: %w", err)
		}
	}
	return &cert, nil
}

// ReadAPICertificate returns the leaf certificate the API serves: the one in
// certFile when given (the --api-tls-cert of the edge), else the generated
// one of dataDir. It reads no private key.
func ReadAPICertificate(dataDir, certFile string) (*x509.Certificate, error) {
	path := certFile
	if path == "" {
		path = APICertPath(dataDir)
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && certFile == "" {
		return nil, fmt.Errorf("no generated API certificate in %s yet: tuna-edge makes it on its first start without --api-tls-cert; start the edge once, or pass --api-tls-cert", dataDir)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the API certificate: %w", err)
	}
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return nil, fmt.Errorf("%s holds no PEM certificate", path)
		}
		if b.Type == "CERTIFICATE" {
			cert, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%s: parsing the certificate: %w", path, err)
			}
			return cert, nil
		}
	}
}

// uncovered lists the hosts the certificate does not name.
func uncovered(leaf *x509.Certificate, hosts []string) []string {
	var out []string
	for _, h := range hosts {
		if leaf.VerifyHostname(h) != nil {
			out = append(out, h)
		}
	}
	return out
}
