package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Secrets are kept in two buckets: their metadata, in clear so lists and
// long polls never read or decrypt values, and their sealed data (nonce
// and ciphertext, sealed by edge/internal/secrets). Both change in one transaction.

// SecretMeta is what the edge knows of a secret without decrypting it.
// Keys (the names of its values) are in clear: they name, not hold, data.
type SecretMeta struct {
	Name      string    `json:"name"`
	Version   int64     `json:"version"`
	Keys      []string  `json:"keys"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// KeyID names the encryption key that sealed the data.
	KeyID string `json:"key_id"`
}

// SealedSecret is a secret as stored: metadata, nonce and ciphertext.
type SealedSecret struct {
	SecretMeta
	Nonce      []byte `json:"nonce"`
	Ciphertext []byte `json:"ciphertext"`
}

func getSecret(tx tx, name string) (*SealedSecret, error) {
	meta, err := get[SecretMeta](tx, bucketSecrets, name)
	if err != nil {
		return nil, err
	}
	out := &SealedSecret{SecretMeta: meta}
	sealed := struct {
		Nonce      []byte `json:"nonce"`
		Ciphertext []byte `json:"ciphertext"`
	}{}
	data, err := tx.get(bucketSecretValues, name)
	if err != nil {
		return nil, err
	}
	if data == nil {
		return nil, fmt.Errorf("secret %q has metadata but no data", name)
	}
	if err := json.Unmarshal(data, &sealed); err != nil {
		return nil, fmt.Errorf("decoding %s/%s: %w", bucketSecretValues, name, err)
	}
	out.Nonce, out.Ciphertext = sealed.Nonce, sealed.Ciphertext
	return out, nil
}

func putSecret(tx tx, s *SealedSecret) error {
	if err := put(tx, bucketSecrets, s.Name, s.SecretMeta, false); err != nil {
		return err
	}
	return put(tx, bucketSecretValues, s.Name, struct {
		Nonce      []byte `json:"nonce"`
		Ciphertext []byte `json:"ciphertext"`
	}{s.Nonce, s.Ciphertext}, false)
}

// countSecrets walks the keys: bbolt's Bucket.Stats reads committed pages
// only, and misses the transaction's own changes.
func countSecrets(tx tx) (int, error) {
	n := 0
	err := tx.each(bucketSecrets, "", func(string, []byte) error { n++; return nil })
	return n, err
}

// GetSecret returns a sealed secret, or ErrNotFound.
func (s *Store) GetSecret(name string) (SealedSecret, error) {
	var out SealedSecret
	err := s.be.view(func(tx tx) error {
		rec, err := getSecret(tx, name)
		if err == nil {
			out = *rec
		}
		return err
	})
	return out, err
}

// ListSecrets returns the metadata of the secrets whose names start with
// prefix, ordered by name.
func (s *Store) ListSecrets(prefix string) ([]SecretMeta, error) {
	var out []SecretMeta
	err := s.be.view(func(tx tx) error {
		out = []SecretMeta{}
		return tx.each(bucketSecrets, prefix, func(k string, v []byte) error {
			var m SecretMeta
			if err := json.Unmarshal(v, &m); err != nil {
				return fmt.Errorf("decoding %s/%s: %w", bucketSecrets, k, err)
			}
			out = append(out, m)
			return nil
		})
	})
	return out, err
}

// CountSecrets returns how many secrets are stored.
func (s *Store) CountSecrets() (int, error) {
	var n int
	err := s.be.view(func(tx tx) error {
		var err error
		n, err = countSecrets(tx)
		return err
	})
	return n, err
}

// SecretUpdate decides a write in its transaction: given the stored
// secret (nil when there is none) and the number of secrets, it returns
// the record to store, or nil to leave things as they are. It may be called
// again when a transaction is retried, so it must not keep effects.
type SecretUpdate func(old *SealedSecret, count int) (*SealedSecret, error)

// PutSecret creates or replaces a secret as update decides, in one write
// transaction, so a version check inside update cannot race another
// writer. It returns the stored record, whether it changed, and the
// number of secrets afterwards.
func (s *Store) PutSecret(name string, update SecretUpdate) (out SealedSecret, changed bool, count int, err error) {
	err = s.write(func(tx tx) error {
		out, changed = SealedSecret{}, false
		old, err := getSecret(tx, name)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if count, err = countSecrets(tx); err != nil {
			return err
		}
		rec, err := update(old, count)
		if err != nil {
			return err
		}
		if rec == nil {
			if old != nil {
				out = *old
			}
			return nil
		}
		rec.Name = name
		if err := putSecret(tx, rec); err != nil {
			return err
		}
		if old == nil {
			count++
		}
		out, changed = *rec, true
		return nil
	})
	return out, changed, count, err
}

// DeleteSecret removes a secret (ErrNotFound when absent) and returns the
// number of secrets left.
func (s *Store) DeleteSecret(name string) (count int, err error) {
	err = s.write(func(tx tx) error {
		if err := del(tx, bucketSecrets, name); err != nil {
			return err
		}
		if err := tx.del(bucketSecretValues, name); err != nil {
			return err
		}
		var err error
		count, err = countSecrets(tx)
		return err
	})
	return count, err
}

// resealBatch bounds one etcd transaction of ResealSecrets: etcd refuses
// transactions of more than 128 operations by default.
const resealBatch = 50

// ResealSecrets offers every secret to reseal; reseal changes the record
// in place and reports whether it did. On bbolt, one transaction writes
// every changed record or none. On etcd, secrets are resealed in batches
// of resealBatch, each all or nothing: a batch that fails leaves the
// others sealed with the key they had, which the keyring still opens.
func (s *Store) ResealSecrets(reseal func(*SealedSecret) (bool, error)) (n int, err error) {
	var names []string
	err = s.be.view(func(tx tx) error {
		names = nil
		return tx.each(bucketSecrets, "", func(k string, _ []byte) error {
			names = append(names, k)
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	batch := len(names)
	if s.etcd != nil {
		batch = resealBatch
	}
	for len(names) > 0 {
		chunk := names[:min(batch, len(names))]
		names = names[len(chunk):]
		done := 0
		err := s.write(func(tx tx) error {
			done = 0
			for _, name := range chunk {
				rec, err := getSecret(tx, name)
				if errors.Is(err, ErrNotFound) {
					continue // deleted since the list
				}
				if err != nil {
					return err
				}
				changed, err := reseal(rec)
				if err != nil {
					return err
				}
				if !changed {
					continue
				}
				if err := putSecret(tx, rec); err != nil {
					return err
				}
				done++
			}
			return nil
		})
		if err != nil {
			if s.etcd == nil {
				n = 0
			}
			return n, err
		}
		n += done
	}
	return n, nil
}
