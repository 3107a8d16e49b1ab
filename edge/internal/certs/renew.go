package certs

import (
	"context"
	"encoding/json"
	"time"
)

// Renewal: a certificate obtained through ACME is ordered again once less
// than a third of its lifetime is left (at most 30 days before it
// expires). Each node scans the certificates' dates in the store (small
// records, not the chains) every RenewCheck; the first node to claim a
// host's order renews it, the others find the new certificate in the
// store. A node also looks in the store, at most once a minute, for a
// newer copy of a certificate it serves from memory once that one is due.

// RenewCheck is how often a node scans the certificates for renewal.
const RenewCheck = time.Hour

// storeRecheck bounds how often a node asks the store for a renewed copy
// of a certificate it serves from memory.
const storeRecheck = time.Minute

// renewBefore is how long before its expiry a certificate valid from
// notBefore to notAfter is renewed.
func renewBefore(notBefore, notAfter time.Time) time.Duration {
	return min(notAfter.Sub(notBefore)/3, 30*24*time.Hour)
}

// renewalDue reports whether a certificate valid from notBefore to
// notAfter needs renewing at now.
func renewalDue(notBefore, notAfter, now time.Time) bool {
	return !now.Before(notAfter.Add(-renewBefore(notBefore, notAfter)))
}

// upkeep starts, in the background, what a served entry is due for.
func (m *Manager) upkeep(e *entry, now time.Time) {
	m.ocspUpkeep(e, now)
	if e.name == "" || !renewalDue(e.leaf.NotBefore, e.notAfter, now) {
		return
	}
	if now.Sub(time.Unix(0, e.checked.Load())) < storeRecheck || !e.checking.CompareAndSwap(false, true) {
		return
	}
	e.checked.Store(now.UnixNano())
	go func() {
		defer e.checking.Store(false)
		if rec, err := m.cfg.Store.TLSCert(e.name); err == nil && rec.NotAfter.After(e.notAfter) {
			if _, err := m.load(e.name); err != nil {
				m.cfg.Logger.Warn("loading a renewed certificate", "host", e.name, "err", err)
			}
			return
		}
		if e.managed && m.cfg.ACME != nil {
			m.renew(e.name)
		}
	}()
}

// renew orders host's certificate again if the edge still serves it.
func (m *Manager) renew(host string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.cfg.HostPolicy(ctx, host); err != nil {
		m.cfg.Logger.Info("not renewing a certificate for a host the edge no longer serves", "host", host, "reason", err)
		return
	}
	if err := m.obtain(context.Background(), host); err != nil {
		m.cfg.Logger.Error("renewing a certificate failed; the current one is served until it expires", "host", host, "err", err)
		return
	}
	if _, err := m.load(host); err != nil {
		m.cfg.Logger.Warn("loading a renewed certificate", "host", host, "err", err)
	}
}

// RenewDue renews every managed certificate in the store that is due.
func (m *Manager) RenewDue() error {
	if m.cfg.ACME == nil {
		return nil
	}
	dates, err := m.cfg.Store.TLSCertDates()
	if err != nil {
		return err
	}
	now := m.cfg.Now()
	for host, d := range dates {
		if d.Managed && renewalDue(d.NotBefore, d.NotAfter, now) {
			m.renew(host)
		}
	}
	return nil
}

// Run renews due certificates every RenewCheck until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	t := time.NewTicker(RenewCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := m.RenewDue(); err != nil {
				m.cfg.Logger.Warn("scanning certificates for renewal", "err", err)
			}
		}
	}
}

func jsonMarshal(v any) ([]byte, error)   { return json.Marshal(v) }
func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
