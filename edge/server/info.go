package server

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/internal/third_party/xcrypto/ssh"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/api"
	"code.tuna.am/tuna/k8s-operator/edge/internal/registry"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
	"code.tuna.am/tuna/k8s-operator/edge/metrics"
	"code.tuna.am/tuna/k8s-operator/internal/version"
)

// What the edge tells about itself: the addresses its listeners got, the
// information GET /v1/edge returns, the URL a host is published at; and
// API keys made directly in its store.

// APIURL is the control API's base URL, e.g. "https://127.0.0.1:41234".
func (e *Edge) APIURL() string { e.mu.Lock(); defer e.mu.Unlock(); return e.apiURL }

// SSHAddr is the address the SSH listener got.
func (e *Edge) SSHAddr() string { e.mu.Lock(); defer e.mu.Unlock(); return e.sshAddr }

// HTTPAddr is the address the public HTTP listener got ("" when off).
func (e *Edge) HTTPAddr() string { e.mu.Lock(); defer e.mu.Unlock(); return e.httpAddr }

// HTTPSAddr is the address the public HTTPS listener got ("" when off).
func (e *Edge) HTTPSAddr() string { e.mu.Lock(); defer e.mu.Unlock(); return e.httpsAddr }

// HostKey is the SSH host public key in authorized_keys form.
func (e *Edge) HostKey() string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(e.hostKey.PublicKey())))
}

// Metrics exposes the edge's metrics (registry and handler).
func (e *Edge) Metrics() *metrics.Metrics { return e.m }

// ActiveSessions lists the live tunnel sessions.
func (e *Edge) ActiveSessions() []registry.Info { return e.reg.List() }

// CreateAPIKey makes an API key directly in the store (bootstrap, tests)
// and returns its secret.
func (e *Edge) CreateAPIKey(name string, scopes []string) (string, error) {
	return e.CreateBoundAPIKey(name, scopes, "")
}

// CreateBoundAPIKey makes an API key bound to an owner prefix (a cluster
// id; "" binds nothing) and returns its secret.
func (e *Edge) CreateBoundAPIKey(name string, scopes []string, ownerPrefix string) (string, error) {
	k, err := api.CreateAPIKey(e.st, name, scopes, func() store.APIKey {
		return store.APIKey{CreatedAt: time.Now().UTC(), OwnerPrefix: ownerPrefix}
	})
	if err != nil {
		return "", fmt.Errorf("creating API key %q: %w", name, err)
	}
	return k.Key, nil
}

// Info is what GET /v1/edge returns.
func (e *Edge) Info() apiwire.EdgeInfo {
	e.mu.Lock()
	sshAddr, httpAddr, httpsAddr := e.sshAddr, e.httpAddr, e.httpsAddr
	e.mu.Unlock()
	return e.infoOf(sshAddr, httpAddr, httpsAddr)
}

// infoOf is Info for the listeners' addresses.
func (e *Edge) infoOf(sshAddr, httpAddr, httpsAddr string) apiwire.EdgeInfo {
	info := apiwire.EdgeInfo{
		BaseDomain: e.cfg.BaseDomain,
		SSHAddr:    e.cfg.SSHAdvertiseAddr,
		SSHHostKey: e.HostKey(),
		TCPHost:    e.cfg.PublicTCPHost,
		// The release the linker stamped (internal/version), as
		// `tuna-edge version` prints it.
		Version:                 version.Get().Version,
		DNSVerificationDisabled: e.cfg.DNSResolver == "",
		AnyHost:                 e.cfg.AnyHost,
		GatewayHTTPPort:         e.cfg.GatewayHTTPPort,
	}
	for _, a := range e.cfg.GatewayAddresses {
		info.GatewayAddresses = append(info.GatewayAddresses, a.String())
	}
	if e.cfg.HTTPSListen != "" {
		info.GatewayHTTPSPort = e.cfg.GatewayHTTPSPort
	}
	if len(info.GatewayAddresses) == 0 {
		info.GatewayHTTPPort, info.GatewayHTTPSPort = 0, 0
	}
	if info.SSHAddr == "" {
		info.SSHAddr = dialable(sshAddr)
	}
	if httpAddr != "" {
		info.HTTPURL = baseURL(e.cfg.HTTPAdvertiseURL, "http", e.cfg.BaseDomain, httpAddr)
	}
	if httpsAddr != "" {
		info.HTTPSURL = baseURL(e.cfg.HTTPSAdvertiseURL, "https", e.cfg.BaseDomain, httpsAddr)
	}
	return info
}

// publicURL is the URL a bound host is published at: HTTPS when the edge
// serves it, HTTP otherwise.
func (e *Edge) publicURL(host string) string {
	info := e.Info()
	base := info.HTTPSURL
	if base == "" {
		base = info.HTTPURL
	}
	u, err := url.Parse(base)
	if err != nil {
		return "http://" + host
	}
	if p := u.Port(); p != "" {
		return u.Scheme + "://" + net.JoinHostPort(host, p)
	}
	return u.Scheme + "://" + host
}

func baseURL(advertised, scheme, baseDomain, listenAddr string) string {
	if advertised != "" {
		return strings.TrimRight(advertised, "/")
	}
	_, port, _ := net.SplitHostPort(listenAddr)
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		return scheme + "://" + baseDomain
	}
	return scheme + "://" + net.JoinHostPort(baseDomain, port)
}

// dialable turns a wildcard listen address into one a local client can dial.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
