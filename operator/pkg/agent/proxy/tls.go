package proxy

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"
	"weak"
)

// TLS says how the certificate of an https upstream is checked: the one
// piece that a Tunnel's spec.upstream.tls, an Ingress's upstream
// annotations and a Gateway's BackendTLSPolicy all turn into. The zero
// value trusts the system's roots for the address's own host.
type TLS struct {
	// CA is a PEM bundle. When set, only its certificates are trusted, not
	// the system's roots.
	CA []byte
	// ServerName is the name the certificate must be issued for, also sent
	// as SNI; empty: the host of the address dialled.
	ServerName string
	// InsecureSkipVerify accepts any certificate. Only an explicit request
	// by name (insecureSkipVerify: true) sets it.
	InsecureSkipVerify bool
}

// Config builds the client TLS configuration, failing when CA holds no
// certificate. HTTP/2 is offered by ALPN, so a gRPC server behind TLS
// works; servers that do not speak it keep HTTP/1.1.
func (t *TLS) Config() (*tls.Config, error) {
	c := &tls.Config{ServerName: t.ServerName, MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // only when asked for by name
	if len(t.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(t.CA) {
			return nil, &TLSError{Cause: errors.New("the CA bundle holds no PEM certificate")}
		}
		c.RootCAs = pool
	}
	return c, nil
}

// Digest identifies the settings: equal settings share one transport, so
// route table swaps and many tunnels to one Service reuse connections.
func (t *TLS) Digest() string {
	if t == nil {
		return ""
	}
	h := sha256.New()
	fmt.Fprintf(h, "%q|%t|", t.ServerName, t.InsecureSkipVerify)
	h.Write(t.CA)
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// TLSError is a failed TLS handshake with the upstream or an unusable TLS
// configuration: something the user fixes in the upstream's certificate
// or in the TLS settings, as opposed to an upstream that does not answer.
type TLSError struct {
	Addr  string
	Cause error
}

func (e *TLSError) Error() string {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var rec tls.RecordHeaderError
	switch {
	case errors.As(e.Cause, &unknown):
		return "its certificate is signed by an unknown authority: trust its CA (a Tunnel's spec.upstream.tls.caRef, the annotation k8s.tuna.am/upstream-ca)"
	case errors.As(e.Cause, &host):
		return fmt.Sprintf("its certificate is not valid for %s (%v): set the name it holds (spec.upstream.tls.serverName, the annotation k8s.tuna.am/upstream-server-name)", host.Host, host.Error())
	case errors.As(e.Cause, &invalid):
		return "its certificate is not valid: " + invalid.Error()
	case errors.As(e.Cause, &rec):
		return "it does not speak TLS: use an http:// upstream, or the port where it serves TLS"
	}
	return "TLS handshake failed: " + e.Cause.Error()
}

func (e *TLSError) Unwrap() error { return e.Cause }

// CheckTLS completes a TLS handshake with the upstream at addr as the proxy
// would. It returns a *TLSError when the handshake fails on certificates or
// protocol, and another error when addr cannot be reached at all (a backend
// that is down is not a TLS problem).
func CheckTLS(ctx context.Context, addr string, t *TLS) error {
	cfg, err := t.Config()
	if err != nil {
		return err
	}
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	cfg.NextProtos = []string{"h2", "http/1.1"}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer func() { _ = raw.Close() }() // a probe: nothing was written that a close could lose
	conn := tls.Client(raw, cfg)
	if err := conn.HandshakeContext(ctx); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || ctx.Err() != nil {
			return err
		}
		return &TLSError{Addr: addr, Cause: err}
	}
	return conn.Close()
}

// tlsTransports shares one transport per TLS setting. Entries are weak: a
// transport lives while a proxy uses it (and while its idle connections
// do), then goes, so changing a CA bundle leaves nothing behind.
var tlsTransports = struct {
	sync.Mutex
	m map[string]weak.Pointer[http.Transport]
}{m: map[string]weak.Pointer[http.Transport]{}}

// transportFor returns the shared transport of t's settings. It is called
// when an upstream is set, never per request.
func transportFor(t *TLS) (*http.Transport, error) {
	cfg, err := t.Config()
	if err != nil {
		return nil, err
	}
	key := t.Digest()
	tlsTransports.Lock()
	defer tlsTransports.Unlock()
	if tr := tlsTransports.m[key].Value(); tr != nil {
		return tr, nil
	}
	tr := transport.Clone()
	tr.TLSClientConfig = cfg
	p := &http.Protocols{}
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	tr.Protocols = p
	tlsTransports.m[key] = weak.Make(tr)
	runtime.AddCleanup(tr, func(key string) {
		tlsTransports.Lock()
		defer tlsTransports.Unlock()
		if tlsTransports.m[key].Value() == nil {
			delete(tlsTransports.m, key)
		}
	}, key)
	return tr, nil
}

// tlsTransportCount is how many TLS transports are cached (for tests).
func tlsTransportCount() int {
	tlsTransports.Lock()
	defer tlsTransports.Unlock()
	return len(tlsTransports.m)
}

// tlsFailure says why a request to an https upstream failed, when TLS is
// the reason.
func tlsFailure(err error) (string, bool) {
	var te *TLSError
	if errors.As(err, &te) {
		return te.Error(), true
	}
	var cv *tls.CertificateVerificationError
	var rec tls.RecordHeaderError
	if errors.As(err, &cv) || errors.As(err, &rec) || strings.Contains(err.Error(), "tls: ") {
		return (&TLSError{Cause: err}).Error(), true
	}
	return "", false
}
