package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"

	"code.tuna.am/tuna/k8s-operator/edge/internal/certs"
)

// newCertManager builds the HTTPS listener's certificate manager: the
// certificates in the store (ordered by ACME with --acme-directory),
// cached in memory up to TLSCertCacheSize, and the --tls-cert-file
// certificate for every other name.
func (e *Edge) newCertManager() (*certs.Manager, error) {
	cfg := certs.Config{
		Store:      e.st,
		Seal:       e.ring,
		CacheSize:  e.cfg.TLSCertCacheSize,
		HostPolicy: e.acmeHostPolicy,
		Node:       e.cfg.NodeName,
		Now:        e.cfg.Clock,
		Logger:     e.log,
	}
	if cfg.Node == "" {
		cfg.Node = "edge"
	}
	if e.cfg.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(e.cfg.TLSCertFile, e.cfg.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("edge: loading public TLS certificate: %w", err)
		}
		cfg.Default = &cert
	}
	if e.acmeOn() {
		cfg.ACME = &certs.ACME{DirectoryURL: e.cfg.ACMEDirectory, Email: e.cfg.ACMEEmail, Challenges: e.cfg.ACMEChallenges}
		if e.cfg.ACMECAFile != "" {
			hc, err := httpClientTrusting(e.cfg.ACMECAFile)
			if err != nil {
				return nil, err
			}
			cfg.ACME.HTTPClient = hc
		}
	}
	return certs.New(cfg)
}

// publicTLS is the HTTPS listener's TLS configuration: the certificate
// manager and the session ticket keys every node shares. It starts their
// upkeep (ticket key sync, certificate renewal) until Close.
func (e *Edge) publicTLS() (*tls.Config, error) {
	cfg := e.certs.TLSConfig()
	t, err := certs.NewTickets(certs.TicketConfig{
		Store:    e.st,
		Seal:     e.ring,
		Rotation: e.cfg.TLSTicketRotation,
		Kept:     e.cfg.TLSTicketKeysKept,
		Now:      e.cfg.Clock,
		Logger:   e.log,
	})
	if err != nil {
		return nil, fmt.Errorf("edge: session ticket keys: %w", err)
	}
	if err := t.Sync(); err != nil {
		// Tickets still work, on this node alone, until a sync succeeds.
		e.log.Warn("session ticket keys: the store did not answer; tickets resume on this node only until it does", "err", err)
	}
	e.tickets = t
	t.Apply(cfg)
	ctx, stop := context.WithCancel(context.Background())
	e.stopTLS = stop
	e.wg.Add(2)
	go func() {
		defer e.wg.Done()
		t.Run(ctx)
	}()
	go func() {
		defer e.wg.Done()
		e.certs.Run(ctx)
	}()
	return cfg, nil
}

// serveGatewayHTTPS serves HTTPS on every Gateway address, on
// GatewayHTTPSPort: the shared listener's TLS (session tickets, h2) with
// the certificate of the address reached, not of the name sent
// (certs.Manager.AddressCertificate).
func (e *Edge) serveGatewayHTTPS(listen func(what, addr string) (net.Listener, error), shared *tls.Config) error {
	for _, a := range e.cfg.GatewayAddresses {
		what := "Gateway address " + a.String() + " (HTTPS)"
		ln, err := listen(what, net.JoinHostPort(a.String(), strconv.Itoa(e.cfg.GatewayHTTPSPort)))
		if err != nil {
			return err
		}
		srv := e.public.AddressServer("https", a.String())
		srv.TLSConfig = shared.Clone()
		srv.TLSConfig.GetCertificate = e.certs.AddressCertificate(a.String())
		srv.TLSConfig.NextProtos = []string{"h2", "http/1.1"}
		e.serveHTTP(what, srv, ln, true)
	}
	return nil
}

// SyncTLS makes the node do now what it does periodically with the shared
// TLS state: publish due ticket keys and take the stored ones into use,
// and renew due certificates.
func (e *Edge) SyncTLS() error {
	if e.tickets == nil {
		return nil
	}
	if err := e.tickets.Sync(); err != nil {
		return err
	}
	return e.certs.RenewDue()
}

// CertManager is the HTTPS listener's certificate manager (nil without
// HTTPS).
func (e *Edge) CertManager() *certs.Manager { return e.certs }

// acmeOn: ACME orders certificates when no certificate file is given.
func (e *Edge) acmeOn() bool { return e.cfg.ACMEDirectory != "" && e.cfg.TLSCertFile == "" }
