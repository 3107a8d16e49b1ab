package store

import (
	"errors"
	"slices"
)

// Every record the store keeps sealed with the secrets keyring: secrets'
// data, the access keys and policies, and the HTTPS listener's private
// parts (certificates' keys, session ticket keys, the ACME account key).
// A key of the keyring may leave it only once none of these names it.

// The names the HTTPS listener's secret parts are sealed for: the
// additional data of their sealing, so that a key copied under another
// name does not open.
const ACMEAccountSealName = "tls/acme-account"

// ACMEAccountKey is where the sealed ACME account key is kept in the ACME
// bucket (ACMEValue).
const ACMEAccountKey = "account"

// TLSCertSealName is what host's certificate key is sealed for.
func TLSCertSealName(host string) string { return "tls/cert-key/" + host }

// TicketKeySealName is what the session ticket key id is sealed for.
func TicketKeySealName(id string) string { return "tls/ticket-key/" + id }

// resealTLSBatch bounds one etcd transaction of ResealTLS: each
// certificate writes two records, and etcd refuses more than 128
// operations in one.
const resealTLSBatch = 50

// ResealTLS offers the HTTPS listener's sealed parts to reseal, which
// changes one in place and reports whether it did: every certificate's
// private key, then the session ticket keys, then the ACME account key.
// On etcd the certificates go in batches, each all or nothing: a batch
// that fails leaves the others sealed with the key they had, which the
// keyring still opens. It returns how many it changed.
func (s *Store) ResealTLS(reseal func(name string, sd *Sealed) (bool, error)) (int, error) {
	var hosts []string
	err := s.be.view(func(tx tx) error {
		hosts = nil
		return tx.each(bucketTLSCerts, "", func(k string, _ []byte) error {
			hosts = append(hosts, k)
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for chunk := range slices.Chunk(hosts, resealTLSBatch) {
		done := 0
		err := s.write(func(tx tx) error {
			done = 0
			for _, host := range chunk {
				c, err := get[TLSCert](tx, bucketTLSCerts, host)
				if errors.Is(err, ErrNotFound) {
					continue // deleted since the list
				}
				if err != nil {
					return err
				}
				changed, err := reseal(TLSCertSealName(host), &c.Key)
				if err != nil || !changed {
					if err != nil {
						return err
					}
					continue
				}
				if err := put(tx, bucketTLSCerts, host, c, false); err != nil {
					return err
				}
				done++
			}
			return nil
		})
		if err != nil {
			return n, err
		}
		n += done
	}
	done := 0
	err = s.write(func(tx tx) error {
		done = 0
		keys, err := ticketKeys(tx)
		if err != nil {
			return err
		}
		changed := false
		for i := range keys {
			c, err := reseal(TicketKeySealName(keys[i].ID), &keys[i].Secret)
			if err != nil {
				return err
			}
			if c {
				changed = true
				done++
			}
		}
		if changed {
			if err := put(tx, bucketTicketKeys, ticketRingKey, keys, false); err != nil {
				return err
			}
		}
		acct, err := get[Sealed](tx, bucketACME, ACMEAccountKey)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if c, err := reseal(ACMEAccountSealName, &acct); err != nil || !c {
			return err
		}
		done++
		return put(tx, bucketACME, ACMEAccountKey, acct, false)
	})
	return n + done, err
}

// SealedKeyIDs returns the ids of the secrets keys that seal any stored
// record, sorted: secrets, access records and the HTTPS listener's keys.
func (s *Store) SealedKeyIDs() ([]string, error) {
	var ids []string
	add := func(id string) {
		if id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	err := s.be.view(func(tx tx) error {
		ids = nil
		metas, err := list[SecretMeta](tx, bucketSecrets)
		if err != nil {
			return err
		}
		for _, m := range metas {
			add(m.KeyID)
		}
		if k, err := get[Sealed](tx, bucketAccessKeys, accessKeysKey); err == nil {
			add(k.KeyID)
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		ps, err := list[AccessPolicy](tx, bucketAccessPolicies)
		if err != nil {
			return err
		}
		for _, p := range ps {
			add(p.KeyID)
		}
		certs, err := list[TLSCert](tx, bucketTLSCerts)
		if err != nil {
			return err
		}
		for _, c := range certs {
			add(c.Key.KeyID)
		}
		keys, err := ticketKeys(tx)
		if err != nil {
			return err
		}
		for _, k := range keys {
			add(k.Secret.KeyID)
		}
		if a, err := get[Sealed](tx, bucketACME, ACMEAccountKey); err == nil {
			add(a.KeyID)
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		return nil
	})
	slices.Sort(ids)
	return ids, err
}
