package server

import (
	"context"
	"crypto/tls"
	"fmt"

	"code.tuna.am/tuna/k8s-operator/edge/certs"
)

// publicTLS is the HTTPS listener's TLS configuration: its certificates
// (a file, or ACME) and the session ticket keys every node shares.
func (e *Edge) publicTLS() (*tls.Config, error) {
	var cfg *tls.Config
	if e.cfg.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(e.cfg.TLSCertFile, e.cfg.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("edge: loading public TLS certificate: %w", err)
		}
		cfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	} else {
		cfg = e.acme.TLSConfig()
	}
	if err := e.startTickets(); err != nil {
		return nil, err
	}
	e.tickets.Apply(cfg)
	return cfg, nil
}

// startTickets takes the shared session ticket keys into use (publishing
// the first ones if the store has none) and keeps them in sync.
func (e *Edge) startTickets() error {
	t, err := certs.NewTickets(certs.TicketConfig{
		Store:    e.st,
		Seal:     e.ring,
		Rotation: e.cfg.TLSTicketRotation,
		Kept:     e.cfg.TLSTicketKeysKept,
		Now:      e.cfg.Clock,
		Logger:   e.log,
	})
	if err != nil {
		return fmt.Errorf("edge: session ticket keys: %w", err)
	}
	if err := t.Sync(); err != nil {
		// Tickets still work, on this node alone, until a sync succeeds.
		e.log.Warn("session ticket keys: the store did not answer; tickets resume on this node only until it does", "err", err)
	}
	e.tickets = t
	ctx, stop := context.WithCancel(context.Background())
	e.stopTLS = stop
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		t.Run(ctx)
	}()
	return nil
}

// SyncTLS makes the node read the shared TLS state now, as it does
// periodically: ticket keys due are published and the stored ones taken
// into use.
func (e *Edge) SyncTLS() error {
	if e.tickets == nil {
		return nil
	}
	return e.tickets.Sync()
}
