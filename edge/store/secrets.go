package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Secrets are kept in two buckets: their metadata, in clear so lists and
// long polls never read or decrypt values, and their sealed data (nonce
// and ciphertext, sealed by edge/secrets). Both change in one transaction.
var (
	bucketSecrets      = []byte("secrets")
	bucketSecretValues = []byte("secret_values")
)

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

func getSecret(tx *bolt.Tx, name string) (*SealedSecret, error) {
	meta, err := get[SecretMeta](tx, bucketSecrets, name)
	if err != nil {
		return nil, err
	}
	out := &SealedSecret{SecretMeta: meta}
	sealed := struct {
		Nonce      []byte `json:"nonce"`
		Ciphertext []byte `json:"ciphertext"`
	}{}
	data := tx.Bucket(bucketSecretValues).Get([]byte(name))
	if data == nil {
		return nil, fmt.Errorf("secret %q has metadata but no data", name)
	}
	if err := json.Unmarshal(data, &sealed); err != nil {
		return nil, fmt.Errorf("decoding %s/%s: %w", bucketSecretValues, name, err)
	}
	out.Nonce, out.Ciphertext = sealed.Nonce, sealed.Ciphertext
	return out, nil
}

func putSecret(tx *bolt.Tx, s *SealedSecret) error {
	if err := put(tx, bucketSecrets, s.Name, s.SecretMeta, false); err != nil {
		return err
	}
	return put(tx, bucketSecretValues, s.Name, struct {
		Nonce      []byte `json:"nonce"`
		Ciphertext []byte `json:"ciphertext"`
	}{s.Nonce, s.Ciphertext}, false)
}

// countSecrets walks the keys: Bucket.Stats reads committed pages only,
// and misses the transaction's own changes.
func countSecrets(tx *bolt.Tx) int {
	n := 0
	c := tx.Bucket(bucketSecrets).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	return n
}

// GetSecret returns a sealed secret, or ErrNotFound.
func (s *Store) GetSecret(name string) (SealedSecret, error) {
	var out SealedSecret
	err := s.db.View(func(tx *bolt.Tx) error {
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
	out := []SecretMeta{}
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketSecrets).Cursor()
		p := []byte(prefix)
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			var m SecretMeta
			if err := json.Unmarshal(v, &m); err != nil {
				return fmt.Errorf("decoding %s/%s: %w", bucketSecrets, k, err)
			}
			out = append(out, m)
		}
		return nil
	})
	return out, err
}

// CountSecrets returns how many secrets are stored.
func (s *Store) CountSecrets() (int, error) {
	var n int
	err := s.db.View(func(tx *bolt.Tx) error { n = countSecrets(tx); return nil })
	return n, err
}

// SecretUpdate decides a write in its transaction: given the stored
// secret (nil when there is none) and the number of secrets, it returns
// the record to store, or nil to leave things as they are.
type SecretUpdate func(old *SealedSecret, count int) (*SealedSecret, error)

// PutSecret creates or replaces a secret as update decides, in one write
// transaction, so a version check inside update cannot race another
// writer. It returns the stored record, whether it changed, and the
// number of secrets afterwards.
func (s *Store) PutSecret(name string, update SecretUpdate) (out SealedSecret, changed bool, count int, err error) {
	err = s.db.Update(func(tx *bolt.Tx) error {
		old, err := getSecret(tx, name)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		count = countSecrets(tx)
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
	err = s.db.Update(func(tx *bolt.Tx) error {
		if err := del(tx, bucketSecrets, name); err != nil {
			return err
		}
		if err := tx.Bucket(bucketSecretValues).Delete([]byte(name)); err != nil {
			return err
		}
		count = countSecrets(tx)
		return nil
	})
	return count, err
}

// ResealSecrets offers every secret to reseal in one write transaction;
// reseal changes the record in place and reports whether it did. Either
// every changed record is written or none is.
func (s *Store) ResealSecrets(reseal func(*SealedSecret) (bool, error)) (n int, err error) {
	err = s.db.Update(func(tx *bolt.Tx) error {
		var names []string
		if err := tx.Bucket(bucketSecrets).ForEach(func(k, _ []byte) error {
			names = append(names, string(k))
			return nil
		}); err != nil {
			return err
		}
		// Records are written after the walk: bbolt forbids changing a
		// bucket while ForEach iterates it.
		for _, name := range names {
			rec, err := getSecret(tx, name)
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
			n++
		}
		return nil
	})
	if err != nil {
		n = 0
	}
	return n, err
}
