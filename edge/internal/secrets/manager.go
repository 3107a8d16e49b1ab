package secrets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
)

// ErrNotFound is a secret that does not exist.
var ErrNotFound = store.ErrNotFound

// VersionConflictError refuses a conditional write: the secret is at Have
// (0: it does not exist), the caller expected Want.
type VersionConflictError struct {
	Name       string
	Want, Have int64
}

func (e *VersionConflictError) Error() string {
	if e.Have == 0 {
		return fmt.Sprintf("secret %q does not exist, expected version %d", e.Name, e.Want)
	}
	if e.Want == 0 {
		return fmt.Sprintf("secret %q exists at version %d, expected it not to exist", e.Name, e.Have)
	}
	return fmt.Sprintf("secret %q is at version %d, expected %d", e.Name, e.Have, e.Want)
}

// LimitError refuses a new secret beyond the edge's limit.
type LimitError struct{ Max int }

func (e *LimitError) Error() string {
	return fmt.Sprintf("the edge holds its limit of %d secrets (--max-secrets); delete some or raise the limit", e.Max)
}

// Options configure a Manager.
type Options struct {
	// Max caps the number of secrets; 0 or less: no limit.
	Max int
	// Now is the clock.
	Now func() time.Time
	// Count is told the number of secrets after every change (a gauge).
	Count func(int)
	// Refused is told of every refusal by Max (a counter).
	Refused func()
}

// Manager reads and writes secrets, sealing them with its keyring, and
// broadcasts every change to long polls. Safe for concurrent use.
type Manager struct {
	st   *store.Store
	ring *Keyring
	opt  Options

	// writeMu orders writes with the counts they report: bbolt
	// serialises the transactions, not what follows their commit.
	writeMu sync.Mutex
	mu      sync.Mutex
	changed chan struct{}
}

// Open checks that the keyring opens every stored secret and re-encrypts
// those sealed with a key other than the primary (the rotation step), in
// one transaction. It returns how many it re-encrypted.
func Open(st *store.Store, ring *Keyring, opt Options) (*Manager, int, error) {
	if opt.Now == nil {
		opt.Now = func() time.Time { return time.Now().UTC() }
	}
	m := &Manager{st: st, ring: ring, opt: opt, changed: make(chan struct{})}
	if err := CheckKeys(st, ring); err != nil {
		return nil, 0, err
	}
	primary := ring.Primary()
	n, err := st.ResealSecrets(func(rec *store.SealedSecret) (bool, error) {
		sd := store.Sealed{KeyID: rec.KeyID, Nonce: rec.Nonce, Data: rec.Ciphertext}
		changed, err := ring.Reseal(rec.Name, &sd)
		rec.KeyID, rec.Nonce, rec.Ciphertext = sd.KeyID, sd.Nonce, sd.Data
		return changed, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("re-encrypting secrets with the primary key %s: %w", primary, err)
	}
	count, err := st.CountSecrets()
	if err != nil {
		return nil, 0, fmt.Errorf("counting secrets: %w", err)
	}
	m.count(count)
	return m, n, nil
}

// CheckKeys fails, naming every missing key id, when a stored secret was
// sealed with a key the keyring lacks.
func CheckKeys(st *store.Store, ring *Keyring) error {
	ids, err := StoredKeyIDs(st)
	if err != nil {
		return err
	}
	var missing []string
	for _, id := range ids {
		if !ring.Has(id) {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("stored records (secrets, access records or the HTTPS listener's keys) are encrypted with key(s) %s, which are not configured (configured: %s): "+
			"add the missing key(s) to --secrets-key-file (or TUNA_EDGE_SECRETS_KEY) after the primary key and start again; "+
			"the edge then re-encrypts them with the primary key",
			strings.Join(missing, ", "), strings.Join(ring.IDs(), ", "))
	}
	return nil
}

// StoredKeyIDs returns the ids of the keys that seal any stored record:
// secrets, access records, and the HTTPS listener's keys
// (store.SealedKeyIDs). A key may leave the keyring only once it is not
// among them.
func StoredKeyIDs(st *store.Store) ([]string, error) {
	ids, err := st.SealedKeyIDs()
	if err != nil {
		return nil, fmt.Errorf("listing sealed records: %w", err)
	}
	return ids, nil
}

func (m *Manager) count(n int) {
	if m.opt.Count != nil {
		m.opt.Count(n)
	}
}

// Changed returns a channel that is closed at the next change of any
// secret. Take it before reading the state it guards, so no change slips
// between the read and the wait.
func (m *Manager) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// Notify wakes the long polls as a change does: the edge calls it when
// another node of a cluster changed a secret.
func (m *Manager) Notify() { m.notify() }

func (m *Manager) notify() {
	m.mu.Lock()
	defer m.mu.Unlock()
	close(m.changed)
	m.changed = make(chan struct{})
}

// Put creates or replaces a secret's data (name and data already valid).
// With expected set, the secret must be at that version (0: absent), or
// the answer is a *VersionConflictError. The same data again changes
// nothing: same version, same updated_at.
func (m *Manager) Put(name string, data map[string][]byte, expected *int64) (store.SecretMeta, bool, error) {
	plain, err := json.Marshal(data)
	if err != nil {
		return store.SecretMeta{}, false, fmt.Errorf("encoding secret %q: %w", name, err)
	}
	keys := slices.Sorted(maps.Keys(data))
	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	rec, changed, count, err := m.st.PutSecret(name, func(old *store.SealedSecret, count int) (*store.SealedSecret, error) {
		var have int64
		if old != nil {
			have = old.Version
		}
		if expected != nil && *expected != have {
			return nil, &VersionConflictError{Name: name, Want: *expected, Have: have}
		}
		now := m.opt.Now()
		next := &store.SealedSecret{SecretMeta: store.SecretMeta{Name: name, Version: 1, Keys: keys, CreatedAt: now, UpdatedAt: now}}
		if old == nil {
			if m.opt.Max > 0 && count >= m.opt.Max {
				if m.opt.Refused != nil {
					m.opt.Refused()
				}
				return nil, &LimitError{Max: m.opt.Max}
			}
		} else {
			same, err := m.sameData(old, data)
			if err != nil {
				return nil, err
			}
			if same {
				return nil, nil
			}
			next.Version, next.CreatedAt = old.Version+1, old.CreatedAt
		}
		next.KeyID, next.Nonce, next.Ciphertext, err = m.ring.Seal(name, plain)
		return next, err
	})
	if err != nil {
		return store.SecretMeta{}, false, err
	}
	if changed {
		m.count(count)
		m.notify()
	}
	return rec.SecretMeta, changed && rec.Version == 1, nil
}

func (m *Manager) sameData(old *store.SealedSecret, data map[string][]byte) (bool, error) {
	have, err := m.open(old)
	if err != nil {
		return false, err
	}
	return maps.EqualFunc(have, data, bytes.Equal), nil
}

func (m *Manager) open(rec *store.SealedSecret) (map[string][]byte, error) {
	plain, err := m.ring.Open(rec.Name, rec.KeyID, rec.Nonce, rec.Ciphertext)
	if err != nil {
		return nil, err
	}
	var data map[string][]byte
	if err := json.Unmarshal(plain, &data); err != nil {
		return nil, fmt.Errorf("decoding secret %q: %w", rec.Name, err)
	}
	return data, nil
}

// Get returns a secret with its data; ErrNotFound when absent.
func (m *Manager) Get(name string) (store.SecretMeta, map[string][]byte, error) {
	rec, err := m.st.GetSecret(name)
	if err != nil {
		return store.SecretMeta{}, nil, err
	}
	data, err := m.open(&rec)
	if err != nil {
		return store.SecretMeta{}, nil, err
	}
	return rec.SecretMeta, data, nil
}

// Delete removes a secret; ErrNotFound when absent.
func (m *Manager) Delete(name string) error {
	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	count, err := m.st.DeleteSecret(name)
	if err != nil {
		return err
	}
	m.count(count)
	m.notify()
	return nil
}

// List returns the metadata of the secrets whose names start with prefix,
// sorted by name, without decrypting anything.
func (m *Manager) List(prefix string) ([]store.SecretMeta, error) {
	return m.st.ListSecrets(prefix)
}

// IsNotFound reports whether err is ErrNotFound.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
