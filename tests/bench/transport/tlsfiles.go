package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"code.tuna.am/tuna/k8s-operator/tests/testca"
)

// tlsFiles is the one certificate every TLS row serves, the edge, nginx
// and the direct backend alike: ECDSA P-256 (what the edge's ACME
// certificates are), for the base domain, its subdomains and 127.0.0.1,
// from a CA made for the run.
type tlsFiles struct {
	cert, key, ca string
	pool          *x509.CertPool
}

func (b *bench) tlsFiles() (tlsFiles, error) {
	if b.tls.cert != "" {
		return b.tls, nil
	}
	ca, err := testca.New("tuna transport bench CA")
	if err != nil {
		return tlsFiles{}, err
	}
	leaf, err := ca.Issue(baseDomain, "*."+baseDomain, "127.0.0.1")
	if err != nil {
		return tlsFiles{}, err
	}
	certPEM, keyPEM, err := testca.PEMFiles(leaf)
	if err != nil {
		return tlsFiles{}, err
	}
	dir := filepath.Join(b.dir, "tls")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tlsFiles{}, err
	}
	f := tlsFiles{cert: filepath.Join(dir, "tls.crt"), key: filepath.Join(dir, "tls.key"), ca: filepath.Join(dir, "ca.crt"), pool: ca.Pool()}
	for path, data := range map[string][]byte{f.cert: certPEM, f.key: keyPEM, f.ca: ca.PEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return tlsFiles{}, err
		}
	}
	b.tls = f
	return f, nil
}

// checkHTTPS is checkHTTP over TLS: addr answers host's GET / with the
// backend's 64 bytes, over HTTP/1.1 and over HTTP/2, with the bench's
// certificate verified for host.
func (f tlsFiles) checkHTTPS(addr, host string) error {
	for _, h2 := range []bool{false, true} {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.pool, ServerName: host}, ForceAttemptHTTP2: h2}
		if !h2 {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}
		c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/", nil)
		if err != nil {
			return err
		}
		req.Host = host
		resp, err := c.Do(req)
		if err != nil {
			return fmt.Errorf("GET https://%s/ (Host %s, h2 %v): %w", addr, host, h2, err)
		}
		_ = resp.Body.Close()
		tr.CloseIdleConnections()
		if resp.StatusCode != http.StatusOK || resp.ProtoMajor != map[bool]int{false: 1, true: 2}[h2] {
			return fmt.Errorf("GET https://%s/ (Host %s): %s over %s", addr, host, resp.Status, resp.Proto)
		}
	}
	return nil
}
