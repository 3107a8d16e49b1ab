package certs

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
)

// Session tickets: every node of a cluster encrypts the tickets it issues
// with the same key, kept (sealed) in the shared store, so a client that
// comes back to another node resumes its session there.
//
// The keys follow a schedule rather than a clock on each node: a key is
// written to the store one rotation period before any node encrypts with
// it, so every node that syncs at least once per period knows a key before
// a ticket made with it can reach it. A key encrypts for one period
// (EncryptUntil) and then only decrypts, for Kept more periods
// (DecryptUntil); after that its tickets are refused and the client makes
// a full handshake. Whichever node syncs first when a period begins writes
// the next key, in a store transaction, so two nodes never add two.

// Sealer seals and opens the secret parts of what the store keeps:
// edge/internal/secrets.Keyring.
type Sealer interface {
	Seal(name string, plain []byte) (keyID string, nonce, ct []byte, err error)
	Open(name, keyID string, nonce, ct []byte) ([]byte, error)
}

// Defaults of TicketConfig.
const (
	DefaultTicketRotation = 6 * time.Hour
	DefaultTicketKeysKept = 3
)

// TicketConfig configures the shared session ticket keys.
type TicketConfig struct {
	Store *store.Store
	Seal  Sealer
	// Rotation is how long one key encrypts new tickets (default 6h).
	Rotation time.Duration
	// Kept is how many periods a key still decrypts after it stopped
	// encrypting (default 3): a ticket resumes for at least Kept*Rotation
	// and at most (Kept+1)*Rotation after it was issued.
	Kept int
	// Sync is how often a node reads the keys (default Rotation/12, at
	// most a minute). It must be well under Rotation: a key is published
	// one Rotation ahead of its use.
	Sync   time.Duration
	Now    func() time.Time
	Logger *slog.Logger
}

// Tickets encrypts and decrypts session tickets with the shared keys.
type Tickets struct {
	cfg  TicketConfig
	keys atomic.Pointer[ticketRing]
	// local encrypts when no shared key is known at all (the store was
	// never reached): tickets then resume on this node only.
	local *ticketKey
}

type ticketKey struct {
	id           [8]byte
	aead         cipher.AEAD
	encryptFrom  time.Time
	encryptUntil time.Time
	decryptUntil time.Time
}

type ticketRing struct {
	keys []*ticketKey // by encryptFrom
}

// NewTickets builds the ticket keys; call Sync once before serving and Run
// in the background.
func NewTickets(cfg TicketConfig) (*Tickets, error) {
	if cfg.Rotation <= 0 {
		cfg.Rotation = DefaultTicketRotation
	}
	if cfg.Kept <= 0 {
		cfg.Kept = DefaultTicketKeysKept
	}
	if cfg.Sync <= 0 {
		cfg.Sync = min(cfg.Rotation/12, time.Minute)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	t := &Tickets{cfg: cfg}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	k, err := newTicketKey(id, secret)
	if err != nil {
		return nil, err
	}
	k.decryptUntil = time.Now().Add(100 * 365 * 24 * time.Hour)
	t.local = k
	t.keys.Store(&ticketRing{})
	return t, nil
}

func newTicketKey(id [8]byte, secret []byte) (*ticketKey, error) {
	block, err := aes.NewCipher(secret)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &ticketKey{id: id, aead: gcm}, nil
}

// Apply makes cfg issue and accept the shared tickets. The functions are
// copied by tls.Config.Clone, so clones made later follow key changes too.
func (t *Tickets) Apply(cfg *tls.Config) {
	cfg.WrapSession = t.wrap
	cfg.UnwrapSession = t.unwrap
}

// Run syncs the keys until ctx ends.
func (t *Tickets) Run(ctx context.Context) {
	tick := time.NewTicker(t.cfg.Sync)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := t.Sync(); err != nil {
				t.cfg.Logger.Warn("session ticket keys: syncing with the store failed; the keys known stay in use", "err", err)
			}
		}
	}
}

// Sync drops expired keys and publishes the next ones in the store when
// due (one transaction), then takes the stored keys into use.
func (t *Tickets) Sync() error {
	now := t.cfg.Now()
	stored, err := t.cfg.Store.UpdateTicketKeys(func(cur []store.TicketKey) ([]store.TicketKey, bool) {
		return t.schedule(cur, now)
	})
	if err != nil {
		return err
	}
	return t.load(stored)
}

// schedule is the rotation rule: expired keys go; a key encrypting now and
// the one that follows it exist.
func (t *Tickets) schedule(cur []store.TicketKey, now time.Time) ([]store.TicketKey, bool) {
	next := slices.DeleteFunc(slices.Clone(cur), func(k store.TicketKey) bool { return !now.Before(k.DecryptUntil) })
	changed := len(next) != len(cur)
	slices.SortFunc(next, func(a, b store.TicketKey) int { return a.EncryptFrom.Compare(b.EncryptFrom) })
	if !slices.ContainsFunc(next, func(k store.TicketKey) bool { return encrypts(k, now) }) {
		// First start, or the cluster was down for longer than a period:
		// a key for now. Nodes that have not synced yet do not resume
		// its tickets until they do.
		k, err := t.newKey(now)
		if err != nil {
			t.cfg.Logger.Error("session ticket keys: making a key", "err", err)
			return cur, false
		}
		next, changed = append(next, k), true
	}
	last := next[len(next)-1]
	if !last.EncryptFrom.After(now) {
		k, err := t.newKey(last.EncryptUntil)
		if err != nil {
			t.cfg.Logger.Error("session ticket keys: making a key", "err", err)
			return cur, false
		}
		next, changed = append(next, k), true
	}
	return next, changed
}

func encrypts(k store.TicketKey, now time.Time) bool {
	return !now.Before(k.EncryptFrom) && now.Before(k.EncryptUntil)
}

func (t *Tickets) newKey(from time.Time) (store.TicketKey, error) {
	var id [8]byte
	secret := make([]byte, 32)
	if _, err := rand.Read(id[:]); err != nil {
		return store.TicketKey{}, err
	}
	if _, err := rand.Read(secret); err != nil {
		return store.TicketKey{}, err
	}
	k := store.TicketKey{
		ID:           hex.EncodeToString(id[:]),
		EncryptFrom:  from,
		EncryptUntil: from.Add(t.cfg.Rotation),
		DecryptUntil: from.Add(time.Duration(t.cfg.Kept+1) * t.cfg.Rotation),
	}
	var err error
	k.Secret.KeyID, k.Secret.Nonce, k.Secret.Data, err = t.cfg.Seal.Seal(store.TicketKeySealName(k.ID), secret)
	return k, err
}

// load opens the stored keys; one that does not open (sealed with a
// secrets key this node lacks) is skipped and logged.
func (t *Tickets) load(stored []store.TicketKey) error {
	ring := &ticketRing{}
	var errs []error
	for _, s := range stored {
		var id [8]byte
		if b, err := hex.DecodeString(s.ID); err != nil || len(b) != len(id) {
			errs = append(errs, fmt.Errorf("ticket key %q: bad id", s.ID))
			continue
		} else {
			copy(id[:], b)
		}
		secret, err := t.cfg.Seal.Open(store.TicketKeySealName(s.ID), s.Secret.KeyID, s.Secret.Nonce, s.Secret.Data)
		if err != nil {
			errs = append(errs, fmt.Errorf("ticket key %s: %w", s.ID, err))
			continue
		}
		k, err := newTicketKey(id, secret)
		if err != nil {
			errs = append(errs, fmt.Errorf("ticket key %s: %w", s.ID, err))
			continue
		}
		k.encryptFrom, k.encryptUntil, k.decryptUntil = s.EncryptFrom, s.EncryptUntil, s.DecryptUntil
		ring.keys = append(ring.keys, k)
	}
	slices.SortFunc(ring.keys, func(a, b *ticketKey) int { return a.encryptFrom.Compare(b.encryptFrom) })
	if len(ring.keys) > 0 || len(stored) == 0 {
		t.keys.Store(ring)
	}
	return errors.Join(errs...)
}

// encrypter is the key for a new ticket at now: the shared key of the
// period; past its period (the store unreachable for that long) the newest
// shared key still decrypting; else the node's own.
func (t *Tickets) encrypter(now time.Time) *ticketKey {
	keys := t.keys.Load().keys
	for i := len(keys) - 1; i >= 0; i-- {
		if k := keys[i]; !now.Before(k.encryptFrom) && now.Before(k.encryptUntil) {
			return k
		}
	}
	for i := len(keys) - 1; i >= 0; i-- {
		if k := keys[i]; !now.Before(k.encryptFrom) && now.Before(k.decryptUntil) {
			return k
		}
	}
	return t.local
}

func (t *Tickets) decrypter(id []byte, now time.Time) *ticketKey {
	for _, k := range append(t.keys.Load().keys, t.local) {
		if string(k.id[:]) == string(id) {
			if now.Before(k.decryptUntil) {
				return k
			}
			return nil
		}
	}
	return nil
}

// A ticket is the key's id, a nonce and the sealed session state (the id
// is the additional data).
const ticketHeader = 8 + 12

func (t *Tickets) wrap(_ tls.ConnectionState, ss *tls.SessionState) ([]byte, error) {
	state, err := ss.Bytes()
	if err != nil {
		return nil, err
	}
	k := t.encrypter(t.cfg.Now())
	out := make([]byte, ticketHeader, ticketHeader+len(state)+k.aead.Overhead())
	copy(out, k.id[:])
	if _, err := rand.Read(out[8:ticketHeader]); err != nil {
		return nil, err
	}
	return k.aead.Seal(out, out[8:ticketHeader], state, out[:8]), nil
}

// unwrap returns the session in a ticket, or nil (a full handshake) for a
// ticket that is not ours, whose key is unknown or past its window, or
// that does not open.
func (t *Tickets) unwrap(identity []byte, _ tls.ConnectionState) (*tls.SessionState, error) {
	if len(identity) < ticketHeader {
		return nil, nil
	}
	k := t.decrypter(identity[:8], t.cfg.Now())
	if k == nil {
		return nil, nil
	}
	state, err := k.aead.Open(nil, identity[8:ticketHeader], identity[ticketHeader:], identity[:8])
	if err != nil {
		return nil, nil
	}
	ss, err := tls.ParseSessionState(state)
	if err != nil {
		return nil, nil
	}
	return ss, nil
}
