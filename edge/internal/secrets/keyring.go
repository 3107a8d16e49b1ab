// Package secrets keeps the edge's named secrets encrypted at rest: the
// keyring (AES-256-GCM keys that live outside the database), sealing and
// opening of records, validation of names and data, and the Manager that
// the API calls, with its change broadcast for long polls. The bbolt
// bucket itself is edge/internal/store's (secrets.go there).
package secrets

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
	"code.tuna.am/tuna/k8s-operator/internal/atomicfile"
)

// KeySize is the size of an encryption key: AES-256.
const KeySize = 32

// aadPrefix versions the sealing format; the secret's name follows it in
// the additional data, so a ciphertext copied under another name does not
// open.
const aadPrefix = "tuna-edge secret v1\x00"

// Keyring holds the encryption keys: the first (primary) seals, every key
// opens what it sealed.
type Keyring struct {
	ids  []string
	aead map[string]cipher.AEAD
}

// KeyID names a key in records and logs without revealing it: the first 8
// hex digits of its SHA-256.
func KeyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:4])
}

// NewKeyring builds a keyring; keys[0] is the primary. Duplicates are
// dropped.
func NewKeyring(keys [][]byte) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("no secrets encryption key")
	}
	r := &Keyring{aead: map[string]cipher.AEAD{}}
	for i, k := range keys {
		if len(k) != KeySize {
			return nil, fmt.Errorf("secrets key #%d has %d bytes, want %d (base64 of 32 random bytes, e.g. `openssl rand -base64 32`)", i+1, len(k), KeySize)
		}
		id := KeyID(k)
		if _, dup := r.aead[id]; dup {
			continue
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, fmt.Errorf("secrets key %s: %w", id, err)
		}
		gcm, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("secrets key %s: %w", id, err)
		}
		r.ids = append(r.ids, id)
		r.aead[id] = gcm
	}
	return r, nil
}

// ParseKeys reads base64 keys, one per line or comma-separated; blank
// lines and lines starting with '#' are skipped.
func ParseKeys(text string) ([][]byte, error) {
	var out [][]byte
	sc := bufio.NewScanner(strings.NewReader(text))
	n := 0
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			continue
		}
		for _, field := range strings.Split(line, ",") {
			if field = strings.TrimSpace(field); field == "" {
				continue
			}
			n++
			k, err := base64.StdEncoding.DecodeString(field)
			if err != nil {
				// The text is key material: never echo it.
				return nil, fmt.Errorf("secrets key #%d is not base64", n)
			}
			out = append(out, k)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no secrets key found (want base64 of 32 bytes per line)")
	}
	return out, nil
}

// LoadKeyFile reads a key file (see ParseKeys).
func LoadKeyFile(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading secrets key file: %w", err)
	}
	keys, err := ParseKeys(string(data))
	if err != nil {
		return nil, fmt.Errorf("secrets key file %s: %w", path, err)
	}
	return keys, nil
}

// GenerateKeyFile writes a new random key to path (mode 0600), atomically,
// and returns it.
func GenerateKeyFile(path string) ([]byte, error) {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generating secrets key: %w", err)
	}
	var buf bytes.Buffer
	buf.WriteString("# tuna-edge secrets encryption key(s): base64, one per line; the first encrypts.\n")
	buf.WriteString(base64.StdEncoding.EncodeToString(key) + "\n")
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	// Create, not replace: an existing file (another edge racing on the
	// same data dir) is never overwritten.
	if err := atomicfile.Create(path, buf.Bytes(), 0o600); err != nil {
		return nil, fmt.Errorf("secrets key file: %w", err)
	}
	return key, nil
}

// Primary is the id of the key that seals.
func (r *Keyring) Primary() string { return r.ids[0] }

// IDs are the ids of every key, primary first.
func (r *Keyring) IDs() []string { return append([]string(nil), r.ids...) }

// Has reports whether the keyring holds the key with this id.
func (r *Keyring) Has(id string) bool { _, ok := r.aead[id]; return ok }

// Seal encrypts plain for the secret name with the primary key.
func (r *Keyring) Seal(name string, plain []byte) (keyID string, nonce, ct []byte, err error) {
	id := r.ids[0]
	gcm := r.aead[id]
	nonce = make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", nil, nil, fmt.Errorf("sealing secret %q: %w", name, err)
	}
	return id, nonce, gcm.Seal(nil, nonce, plain, aad(name)), nil
}

// MissingKeyError is a record sealed with a key the keyring lacks.
type MissingKeyError struct {
	KeyID string
	Name  string
}

func (e *MissingKeyError) Error() string {
	return fmt.Sprintf("secret %q is encrypted with key %s, which is not configured; add that key back to --secrets-key-file "+
		"(or TUNA_EDGE_SECRETS_KEY) after the primary key, start the edge so it re-encrypts, then remove it", e.Name, e.KeyID)
}

// Open decrypts what Seal sealed for the same name.
func (r *Keyring) Open(name, keyID string, nonce, ct []byte) ([]byte, error) {
	gcm, ok := r.aead[keyID]
	if !ok {
		return nil, &MissingKeyError{KeyID: keyID, Name: name}
	}
	if len(nonce) != gcm.NonceSize() {
		return nil, fmt.Errorf("secret %q: bad nonce length %d", name, len(nonce))
	}
	plain, err := gcm.Open(nil, nonce, ct, aad(name))
	if err != nil {
		return nil, fmt.Errorf("secret %q does not decrypt with key %s (altered, or moved from another name): %w", name, keyID, err)
	}
	return plain, nil
}

func aad(name string) []byte { return []byte(aadPrefix + name) }

// Reseal seals sd (sealed for name) again with the primary key unless the
// primary key sealed it already; it reports whether it changed sd. It is
// the rotation step of every sealed record of the store: secrets, access
// records, and the HTTPS listener's keys.
func (r *Keyring) Reseal(name string, sd *store.Sealed) (bool, error) {
	if sd.KeyID == r.Primary() {
		return false, nil
	}
	plain, err := r.Open(name, sd.KeyID, sd.Nonce, sd.Data)
	if err != nil {
		return false, err
	}
	sd.KeyID, sd.Nonce, sd.Data, err = r.Seal(name, plain)
	return err == nil, err
}
