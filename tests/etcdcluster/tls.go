package etcdcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// TLSFiles are a test CA and the certificates it signed: the members'
// serving certificate and one client certificate.
type TLSFiles struct {
	CA                    string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
	// OtherCA signed OtherClient*, a client the cluster must refuse.
	OtherClientCert, OtherClientKey string
}

func writeTLS(dir string) (*TLSFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f := &TLSFiles{}
	ca, caKey, err := newCA(dir, "ca", &f.CA)
	if err != nil {
		return nil, err
	}
	server := &x509.Certificate{IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	if err := issue(dir, "server", server, ca, caKey, &f.ServerCert, &f.ServerKey); err != nil {
		return nil, err
	}
	client := &x509.Certificate{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if err := issue(dir, "client", client, ca, caKey, &f.ClientCert, &f.ClientKey); err != nil {
		return nil, err
	}
	var otherCAFile string
	other, otherKey, err := newCA(dir, "other-ca", &otherCAFile)
	if err != nil {
		return nil, err
	}
	stranger := &x509.Certificate{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if err := issue(dir, "other-client", stranger, other, otherKey, &f.OtherClientCert, &f.OtherClientKey); err != nil {
		return nil, err
	}
	return f, nil
}

var serial int64

func template(cn string, t *x509.Certificate) *x509.Certificate {
	serial++
	t.SerialNumber = big.NewInt(serial)
	t.Subject = pkix.Name{CommonName: cn}
	t.NotBefore, t.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	return t
}

func newCA(dir, name string, file *string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := template(name, &x509.Certificate{IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign})
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	*file = filepath.Join(dir, name+".crt")
	return cert, key, writePEM(*file, "CERTIFICATE", der)
}

func issue(dir, name string, t *x509.Certificate, ca *x509.Certificate, caKey *ecdsa.PrivateKey, certFile, keyFile *string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	t.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, template(name, t), ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	*certFile, *keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := writePEM(*certFile, "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(*keyFile, "EC PRIVATE KEY", keyDER)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// httpClient presents the client certificate, for health checks.
func (f *TLSFiles) httpClient() (*http.Client, error) {
	pemBytes, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	cert, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
	}}}, nil
}
