package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/acme"

	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
)

// DefaultCacheSize bounds the certificates a node keeps in memory.
const DefaultCacheSize = 4096

// Config configures a Manager.
type Config struct {
	Store *store.Store
	Seal  Sealer
	// CacheSize bounds the certificates kept in memory, parsed and with
	// their keys open (default DefaultCacheSize); the others stay in the
	// store and are loaded on their next handshake.
	CacheSize int
	// HostPolicy says whether the edge serves host; a certificate is
	// neither looked up nor ordered for a host it refuses.
	HostPolicy func(ctx context.Context, host string) error
	// Default is served for a name with no certificate of its own (the
	// --tls-cert-file certificate); nil: such a handshake fails.
	Default *tls.Certificate
	// ACME orders missing certificates; nil: only stored ones are served.
	ACME *ACME
	// Node names this node in order claims.
	Node string
	// Holder says who holds a host (store.Store.HostHolder): a
	// certificate its owner uploaded is served only while that owner holds
	// the host. nil: the store's.
	Holder func(host string) (owner string, held bool, err error)
	// Known says, from memory, whether anyone may hold host (a reservation
	// or a tunnel key names it: store.Host.Known); only for such a host is
	// Holder asked before an owner's wildcard certificate covers it. nil:
	// the store's index.
	Known func(host string) bool
	// OCSPClient fetches OCSP responses (default: a client with a 10s
	// timeout).
	OCSPClient *http.Client
	Now        func() time.Time
	Logger     *slog.Logger
}

// Manager serves the HTTPS listener's certificates: from a bounded
// in-memory cache, else from the shared store, else ordered by ACME (one
// node orders, every node serves the result).
type Manager struct {
	cfg   Config
	cache *lru
	// def is the default certificate's entry (its OCSP staple).
	def *entry

	mu     sync.Mutex
	orders map[string]*order // this node's orders in flight, by host
	// failed holds hosts whose last order failed: no new order before
	// retryAt, so handshakes cannot spend the CA's failure limits.
	failed map[string]backoff
}

type backoff struct {
	retryAt time.Time
	wait    time.Duration
}

// order is one certificate order; done closes when it ends.
type order struct {
	done chan struct{}
	err  error
}

// New builds a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = DefaultCacheSize
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.OCSPClient == nil {
		cfg.OCSPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Holder == nil {
		cfg.Holder = cfg.Store.HostHolder
	}
	if cfg.Known == nil {
		cfg.Known = func(host string) bool { return cfg.Store.Host(host).Known() }
	}
	if cfg.HostPolicy == nil {
		cfg.HostPolicy = func(context.Context, string) error { return nil }
	}
	m := &Manager{cfg: cfg, cache: newLRU(cfg.CacheSize), orders: map[string]*order{}, failed: map[string]backoff{}}
	if cfg.Default != nil {
		e, err := newEntry("", *cfg.Default, false)
		if err != nil {
			return nil, fmt.Errorf("default certificate: %w", err)
		}
		m.def = e
	}
	if cfg.ACME != nil {
		cfg.ACME.m = m
	}
	return m, nil
}

// Cached is the number of certificates in memory.
func (m *Manager) Cached() int { return m.cache.len() }

// TLSConfig is a server configuration serving the manager's certificates,
// with h2, http/1.1 and ACME's TLS-ALPN protocol.
func (m *Manager) TLSConfig() *tls.Config {
	return &tls.Config{
		GetCertificate: m.GetCertificate,
		NextProtos:     []string{"h2", "http/1.1", acme.ALPNProto},
		MinVersion:     tls.VersionTLS12,
	}
}

// GetCertificate is tls.Config.GetCertificate.
func (m *Manager) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	host := strings.TrimSuffix(strings.ToLower(hello.ServerName), ".")
	if len(hello.SupportedProtos) == 1 && hello.SupportedProtos[0] == acme.ALPNProto {
		if m.cfg.ACME == nil {
			return nil, errors.New("tuna-edge: no ACME challenge is served here")
		}
		return m.cfg.ACME.alpnCert(host)
	}
	ctx := hello.Context()
	if host == "" {
		return m.fallback(errors.New("tuna-edge: the client sent no server name"))
	}
	if e := m.cached(host); e != nil && m.stillOwned(e) {
		return m.serve(e), nil
	}
	if err := m.cfg.HostPolicy(ctx, host); err != nil {
		if e := m.storedWildcard(host); e != nil {
			return m.serve(e), nil
		}
		return m.fallback(err)
	}
	e, err := m.load(host)
	if err == nil {
		return m.serve(e), nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		m.cfg.Logger.Warn("loading a certificate from the store", "host", host, "err", err)
	}
	if m.cfg.ACME == nil {
		if m.def != nil && errors.Is(err, store.ErrNotFound) {
			// The default serves this host: remembered, so its next
			// handshakes do not ask the store (a round trip to etcd).
			m.cache.put(host, m.def)
		}
		return m.fallback(fmt.Errorf("tuna-edge: no certificate for %s", host))
	}
	if err := m.obtain(ctx, host); err != nil {
		return nil, err
	}
	e, err = m.load(host)
	if err != nil {
		return nil, fmt.Errorf("tuna-edge: certificate for %s: %w", host, err)
	}
	return m.serve(e), nil
}

// AddressCertificate is the GetCertificate of a Gateway address's HTTPS
// listener: the certificate its holder uploaded for the address, whatever
// name the client sent (a Gateway address is reached by names the edge
// does not know, as an in-cluster Gateway's load balancer address is);
// else the default. Nothing is ordered for an address.
func (m *Manager) AddressCertificate(addr string) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		if e := m.cache.get(addr); e != nil && m.stillOwned(e) {
			return m.serve(e), nil
		}
		e, err := m.load(addr)
		if err == nil {
			return m.serve(e), nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			m.cfg.Logger.Warn("loading a certificate from the store", "address", addr, "err", err)
		} else if m.def != nil {
			m.cache.put(addr, m.def)
		}
		return m.fallback(fmt.Errorf("tuna-edge: no certificate for Gateway address %s", addr))
	}
}

func (m *Manager) fallback(err error) (*tls.Certificate, error) {
	if m.def != nil {
		return m.serve(m.def), nil
	}
	return nil, err
}

// cached is host's entry in memory, or its parent's wildcard where it may
// cover host (covers).
func (m *Manager) cached(host string) *entry {
	if e := m.cache.get(host); e != nil {
		return e
	}
	if w := wildcardOf(host); w != "" {
		if e := m.cache.get(w); e != nil && m.covers(e.owner, host) == nil {
			return e
		}
	}
	return nil
}

// covers refuses, as not found, an owner's wildcard certificate for a
// host that another owner holds: the wildcard's owner holds the names
// under it that nobody else holds, and only those get its certificate.
// The edge's own wildcards ("" owner) cover any name, as its default
// certificate does. The store is asked only for a host that may be held
// (Known, from memory), so random names sent as SNI cost no store read.
func (m *Manager) covers(owner, host string) error {
	if owner == "" || !m.cfg.Known(host) {
		return nil
	}
	holder, held, err := m.cfg.Holder(host)
	if err != nil {
		return err
	}
	if held && holder != owner {
		return fmt.Errorf("the wildcard certificate of %s is not served for %s, which %s holds: %w", owner, host, holder, store.ErrNotFound)
	}
	return nil
}

// wildcardOf is the wildcard name that covers host ("" for an IP
// address, or a name of fewer than three labels).
func wildcardOf(host string) string {
	if _, err := netip.ParseAddr(host); err == nil {
		return ""
	}
	if _, parent, ok := strings.Cut(host, "."); ok && strings.Contains(parent, ".") {
		return "*." + parent
	}
	return ""
}

// load reads host's certificate (or its parent's wildcard) from the store
// into the cache.
func (m *Manager) load(host string) (*entry, error) {
	rec, err := m.cfg.Store.TLSCert(host)
	if errors.Is(err, store.ErrNotFound) {
		if w := wildcardOf(host); w != "" {
			rec, err = m.cfg.Store.TLSCert(w)
		}
	}
	if err != nil {
		return nil, err
	}
	return m.admit(rec, host)
}

// storedWildcard is the stored wildcard certificate that covers host, for
// a name the host policy refuses: one no key or reservation names, which
// a wildcard tunnel serves. Nothing is ordered for it, and the store is
// read only when a key or reservation names the wildcard (Known, from
// memory), so random names sent as SNI cost no store read.
func (m *Manager) storedWildcard(host string) *entry {
	w := wildcardOf(host)
	if w == "" || !m.cfg.Known(w) {
		return nil
	}
	rec, err := m.cfg.Store.TLSCert(w)
	if err != nil {
		return nil
	}
	e, err := m.admit(rec, host)
	if err != nil {
		return nil
	}
	return e
}

// admit opens a stored certificate found for host (its own, or a wildcard
// that covers it) and caches it, unless its owner no longer holds it, it
// may not cover host (covers), or it has expired.
func (m *Manager) admit(rec store.TLSCert, host string) (*entry, error) {
	if err := m.holds(rec.Host, rec.Owner); err != nil {
		return nil, err
	}
	if rec.Host != host {
		if err := m.covers(rec.Owner, host); err != nil {
			return nil, err
		}
	}
	e, err := m.open(rec)
	if err != nil {
		return nil, err
	}
	e.owner = rec.Owner
	e.ownerChecked.Store(m.cfg.Now().UnixNano())
	if !m.cfg.Now().Before(e.notAfter) {
		return nil, fmt.Errorf("the stored certificate for %s expired at %s: %w", rec.Host, e.notAfter.Format(time.RFC3339), store.ErrNotFound)
	}
	e.checked.Store(m.cfg.Now().UnixNano())
	m.cache.put(rec.Host, e)
	return e, nil
}

// ownerRecheck is how long a cached certificate an owner uploaded is
// served before the store is asked again whether the owner still holds
// the host.
const ownerRecheck = 10 * time.Second

// holds refuses, as not found, a certificate owner uploaded for host once
// owner no longer holds it: another owner's clients must not get it.
func (m *Manager) holds(host, owner string) error {
	if owner == "" {
		return nil
	}
	holder, held, err := m.cfg.Holder(host)
	if err != nil {
		return err
	}
	if !held || holder != owner {
		return fmt.Errorf("the certificate %s uploaded for %s is not served: the host is no longer theirs: %w", owner, host, store.ErrNotFound)
	}
	return nil
}

// stillOwned reports whether a cached entry may still be served: the
// edge's own always; an owner's while the owner holds the host, looked up
// again every ownerRecheck. One no longer held leaves the cache.
func (m *Manager) stillOwned(e *entry) bool {
	if e.owner == "" {
		return true
	}
	now := m.cfg.Now()
	if now.Sub(time.Unix(0, e.ownerChecked.Load())) < ownerRecheck {
		return true
	}
	if err := m.holds(e.name, e.owner); err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			m.cfg.Logger.Warn("checking who holds a host", "host", e.name, "err", err)
			return true // fail static: the store did not answer
		}
		m.cache.remove(e.name)
		return false
	}
	e.ownerChecked.Store(now.UnixNano())
	return true
}

// open parses a stored certificate and opens its key.
func (m *Manager) open(rec store.TLSCert) (*entry, error) {
	keyPEM, err := m.cfg.Seal.Open(store.TLSCertSealName(rec.Host), rec.Key.KeyID, rec.Key.Nonce, rec.Key.Data)
	if err != nil {
		return nil, fmt.Errorf("opening the key of %s: %w", rec.Host, err)
	}
	c, err := tls.X509KeyPair(rec.ChainPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("certificate of %s: %w", rec.Host, err)
	}
	return newEntry(rec.Host, c, rec.Managed)
}

func newEntry(name string, c tls.Certificate, managed bool) (*entry, error) {
	if c.Leaf == nil {
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			return nil, err
		}
		c.Leaf = leaf
	}
	e := &entry{name: name, leaf: c.Leaf, managed: managed, notAfter: c.Leaf.NotAfter}
	if len(c.Certificate) > 1 {
		if iss, err := x509.ParseCertificate(c.Certificate[1]); err == nil {
			e.issuer = iss
		}
	}
	c.OCSPStaple = nil
	e.served.Store(&c)
	return e, nil
}

// serve returns e's certificate, starting in the background what it is due
// for: an OCSP staple, a look for a renewed certificate.
func (m *Manager) serve(e *entry) *tls.Certificate {
	now := m.cfg.Now()
	m.upkeep(e, now)
	return e.served.Load()
}

// Put seals and stores a certificate (chain PEM, leaf first, and key PEM)
// for host, as an operator or a test CA hands it over, and drops any copy
// in memory.
func (m *Manager) Put(host string, chainPEM, keyPEM []byte, managed bool) error {
	rec, err := m.record(host, chainPEM, keyPEM, managed)
	if err != nil {
		return err
	}
	if err := m.cfg.Store.PutTLSCert(rec); err != nil {
		return err
	}
	m.cache.remove(host)
	return nil
}

// PutOwned seals and stores the certificate owner uploads for host (the
// API checks that owner holds it), replacing any other, and drops any copy
// in memory. It is served while owner holds the host.
func (m *Manager) PutOwned(host, owner string, chainPEM, keyPEM []byte) error {
	rec, err := m.record(host, chainPEM, keyPEM, false)
	if err != nil {
		return err
	}
	rec.Owner = owner
	if err := m.cfg.Store.PutTLSCert(rec); err != nil {
		return err
	}
	m.cache.remove(host)
	return nil
}

// Stored is the certificate stored for host, without its key, or
// store.ErrNotFound.
func (m *Manager) Stored(host string) (store.TLSCert, error) {
	rec, err := m.cfg.Store.TLSCert(host)
	rec.Key = store.Sealed{}
	return rec, err
}

// Remove deletes host's stored certificate and drops any copy in memory.
func (m *Manager) Remove(host string) error {
	if err := m.cfg.Store.DeleteTLSCert(host); err != nil {
		return err
	}
	m.cache.remove(host)
	return nil
}

// record builds the stored form of a certificate: its key sealed.
func (m *Manager) record(host string, chainPEM, keyPEM []byte, managed bool) (store.TLSCert, error) {
	c, err := tls.X509KeyPair(chainPEM, keyPEM)
	if err != nil {
		return store.TLSCert{}, fmt.Errorf("certificate for %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return store.TLSCert{}, err
	}
	rec := store.TLSCert{Host: host, ChainPEM: chainPEM, NotBefore: leaf.NotBefore, NotAfter: leaf.NotAfter, Managed: managed}
	rec.Key.KeyID, rec.Key.Nonce, rec.Key.Data, err = m.cfg.Seal.Seal(store.TLSCertSealName(host), keyPEM)
	return rec, err
}

// Record is the stored form of a certificate, for writing many at once
// with store.PutTLSCerts.
func (m *Manager) Record(host string, chainPEM, keyPEM []byte) (store.TLSCert, error) {
	return m.record(host, chainPEM, keyPEM, false)
}
