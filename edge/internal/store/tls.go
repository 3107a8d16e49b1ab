package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The public HTTPS listener's state, shared by every node of a cluster so
// that any node resumes a session another started, serves the certificate
// another obtained, and answers the CA's challenge for an order another
// placed. Secret parts (ticket keys, private keys) are sealed by the
// caller with the secrets keyring, as named secrets are: the store never
// holds them in clear. Certificates are migrated (MigrateTo): one an
// operator wrote has no other source, and an ACME one would cost an order
// per host. Ticket keys and ACME orders are not: they are short-lived.

// Sealed is a value sealed with the secrets keyring: the key that sealed
// it, the nonce and the ciphertext.
type Sealed struct {
	KeyID string `json:"key_id"`
	Nonce []byte `json:"nonce"`
	Data  []byte `json:"data"`
}

// TicketKey is one TLS session ticket encryption key. Nodes encrypt new
// tickets with it from EncryptFrom until EncryptUntil and accept tickets
// it encrypted until DecryptUntil.
type TicketKey struct {
	ID           string    `json:"id"`
	Secret       Sealed    `json:"secret"`
	EncryptFrom  time.Time `json:"encrypt_from"`
	EncryptUntil time.Time `json:"encrypt_until"`
	DecryptUntil time.Time `json:"decrypt_until"`
}

// TLSCert is a certificate the HTTPS listener serves for Host: the chain
// in PEM, leaf first, and its sealed private key (PEM).
type TLSCert struct {
	Host      string    `json:"host"`
	ChainPEM  []byte    `json:"chain_pem"`
	Key       Sealed    `json:"key"`
	NotBefore time.Time `json:"not_before"`
	NotAfter  time.Time `json:"not_after"`
	// Managed certificates were obtained through ACME and are renewed;
	// others (written by an operator or a test CA) are served as they are.
	Managed bool `json:"managed,omitempty"`
	// Owner is the host's owner that uploaded it (PUT
	// /v1/certificates/{host}); it is served only while that owner holds
	// the host (HostHolder). "" for the edge's own certificates.
	Owner string `json:"owner,omitempty"`
}

// TLSCertDate is what renewal needs of a certificate, kept apart from the
// chain so that a scan of every host reads a few bytes each.
type TLSCertDate struct {
	NotBefore time.Time `json:"not_before"`
	NotAfter  time.Time `json:"not_after"`
	Managed   bool      `json:"managed,omitempty"`
}

func (c TLSCert) date() TLSCertDate {
	return TLSCertDate{NotBefore: c.NotBefore, NotAfter: c.NotAfter, Managed: c.Managed}
}

// ACMEOrder marks an order in flight for a host, so that only one node
// talks to the CA for it; another node waits for the certificate.
type ACMEOrder struct {
	Node  string    `json:"node"`
	Until time.Time `json:"until"`
}

const (
	bucketTicketKeys = "tls_ticket_keys"
	bucketTLSCerts   = "tls_certs"
	bucketTLSDates   = "tls_cert_dates"
	bucketACME       = "acme"
	ticketRingKey    = "ring"
)

// TicketKeys returns the stored session ticket keys.
func (s *Store) TicketKeys() ([]TicketKey, error) {
	var out []TicketKey
	err := s.be.view(func(tx tx) error {
		var err error
		out, err = ticketKeys(tx)
		return err
	})
	return out, err
}

func ticketKeys(tx tx) ([]TicketKey, error) {
	keys, err := get[[]TicketKey](tx, bucketTicketKeys, ticketRingKey)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return keys, err
}

// UpdateTicketKeys replaces the ticket keys with what next makes of the
// stored ones, in one transaction: two nodes rotating at once cannot both
// add a key, as the second sees the first's. next returns false to leave
// them as they are. It returns the keys stored after the call.
func (s *Store) UpdateTicketKeys(next func(cur []TicketKey) ([]TicketKey, bool)) ([]TicketKey, error) {
	var out []TicketKey
	_, err := s.be.update(func(tx tx) error {
		cur, err := ticketKeys(tx)
		if err != nil {
			return err
		}
		upd, changed := next(cur)
		if !changed {
			out = cur
			return nil
		}
		out = upd
		return put(tx, bucketTicketKeys, ticketRingKey, upd, false)
	})
	return out, err
}

// TLSCert returns the certificate stored for host, or ErrNotFound.
func (s *Store) TLSCert(host string) (TLSCert, error) {
	return getOne[TLSCert](s, bucketTLSCerts, host)
}

// PutTLSCert stores (or replaces) a certificate and its date.
func (s *Store) PutTLSCert(c TLSCert) error {
	_, err := s.be.update(func(tx tx) error {
		if err := put(tx, bucketTLSCerts, c.Host, c, false); err != nil {
			return err
		}
		return put(tx, bucketTLSDates, c.Host, c.date(), false)
	})
	return err
}

// PutTLSCerts stores many certificates, a batch per transaction (etcd
// bounds the operations in one).
func (s *Store) PutTLSCerts(certs []TLSCert) error {
	for len(certs) > 0 {
		n := min(len(certs), migrateBatch/2-1)
		batch := certs[:n]
		certs = certs[n:]
		_, err := s.be.update(func(tx tx) error {
			for _, c := range batch {
				if err := put(tx, bucketTLSCerts, c.Host, c, false); err != nil {
					return err
				}
				if err := put(tx, bucketTLSDates, c.Host, c.date(), false); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// DeleteTLSCert removes host's certificate; a missing one is not an error.
func (s *Store) DeleteTLSCert(host string) error {
	_, err := s.be.update(func(tx tx) error {
		if err := tx.del(bucketTLSCerts, host); err != nil {
			return err
		}
		return tx.del(bucketTLSDates, host)
	})
	return err
}

// TLSCertDates returns every stored certificate's date, by host.
func (s *Store) TLSCertDates() (map[string]TLSCertDate, error) {
	out := map[string]TLSCertDate{}
	err := s.be.view(func(tx tx) error {
		return tx.each(bucketTLSDates, "", func(k string, v []byte) error {
			var d TLSCertDate
			if err := json.Unmarshal(v, &d); err != nil {
				return fmt.Errorf("decoding %s/%s: %w", bucketTLSDates, k, err)
			}
			out[k] = d
			return nil
		})
	})
	return out, err
}

// ACMEValue returns what is stored under key in the ACME bucket (the
// account key, a challenge's answer), or ErrNotFound.
func (s *Store) ACMEValue(key string) ([]byte, error) {
	var out []byte
	err := s.be.view(func(tx tx) error {
		v, err := tx.get(bucketACME, key)
		if v == nil && err == nil {
			err = ErrNotFound
		}
		out = v
		return err
	})
	return out, err
}

// PutACMEValue stores value under key; with create set it fails with
// ErrExists when the key is taken (the account key: the first node's
// wins).
func (s *Store) PutACMEValue(key string, value []byte, create bool) error {
	_, err := s.be.update(func(tx tx) error {
		if create {
			if cur, err := tx.get(bucketACME, key); err != nil {
				return err
			} else if cur != nil {
				return ErrExists
			}
		}
		return tx.put(bucketACME, key, value)
	})
	return err
}

// DeleteACMEValue removes key; a missing key is not an error.
func (s *Store) DeleteACMEValue(key string) error {
	_, err := s.be.update(func(tx tx) error { return tx.del(bucketACME, key) })
	return err
}

// ClaimACMEOrder records that node orders host's certificate until until,
// unless another node's claim is still running at now: then it returns
// false and that claim.
func (s *Store) ClaimACMEOrder(host, node string, now, until time.Time) (bool, ACMEOrder, error) {
	var held ACMEOrder
	ok := false
	_, err := s.be.update(func(tx tx) error {
		cur, err := get[ACMEOrder](tx, bucketACME, "order/"+host)
		if err == nil && cur.Node != node && now.Before(cur.Until) {
			held, ok = cur, false
			return nil
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		ok = true
		return put(tx, bucketACME, "order/"+host, ACMEOrder{Node: node, Until: until}, false)
	})
	return ok, held, err
}

// ReleaseACMEOrder ends node's claim on host's order.
func (s *Store) ReleaseACMEOrder(host, node string) error {
	_, err := s.be.update(func(tx tx) error {
		cur, err := get[ACMEOrder](tx, bucketACME, "order/"+host)
		if errors.Is(err, ErrNotFound) || (err == nil && cur.Node != node) {
			return nil
		}
		if err != nil {
			return err
		}
		return tx.del(bucketACME, "order/"+host)
	})
	return err
}
