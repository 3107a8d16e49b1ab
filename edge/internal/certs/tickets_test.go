package certs

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/internal/secrets"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
)

// recordingSealer seals with a real keyring and remembers every plaintext
// it was given, so a test can look for them where they must not be.
type recordingSealer struct {
	*secrets.Keyring
	mu     sync.Mutex
	plains [][]byte
}

func (r *recordingSealer) Seal(name string, plain []byte) (string, []byte, []byte, error) {
	r.mu.Lock()
	r.plains = append(r.plains, bytes.Clone(plain))
	r.mu.Unlock()
	return r.Keyring.Seal(name, plain)
}

func testSealer(t testing.TB) *recordingSealer {
	t.Helper()
	key := make([]byte, secrets.KeySize)
	_, _ = rand.Read(key)
	ring, err := secrets.NewKeyring([][]byte{key})
	if err != nil {
		t.Fatal(err)
	}
	return &recordingSealer{Keyring: ring}
}

func openStore(t testing.TB) (*store.Store, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st, filepath.Join(dir, store.DBFile)
}

func TestTicketKeysSealedInStore(t *testing.T) {
	st, dbFile := openStore(t)
	seal := testSealer(t)
	now := time.Now()
	tk, err := NewTickets(TicketConfig{Store: st, Seal: seal, Rotation: time.Hour, Kept: 1, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.Sync(); err != nil {
		t.Fatal(err)
	}
	stored, err := st.TicketKeys()
	if err != nil {
		t.Fatal(err)
	}
	// The key of now and the next one, published a period ahead.
	if len(stored) != 2 || !stored[1].EncryptFrom.Equal(stored[0].EncryptUntil) || !stored[1].EncryptFrom.After(now) {
		t.Fatalf("stored keys %+v: want the current one and the next, one period ahead", stored)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(dbFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(seal.plains) != 2 {
		t.Fatalf("%d keys sealed, want 2", len(seal.plains))
	}
	for _, p := range seal.plains {
		if bytes.Contains(db, p) {
			t.Fatal("a ticket key is in the database in clear")
		}
	}
}

func TestTicketsRefuseAlteredAndForeign(t *testing.T) {
	st, _ := openStore(t)
	now := time.Now()
	tk, err := NewTickets(TicketConfig{Store: st, Seal: testSealer(t), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.Sync(); err != nil {
		t.Fatal(err)
	}
	ss := sessionState(t)
	ticket, err := tk.wrap(tls.ConnectionState{}, ss)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tk.unwrap(ticket, tls.ConnectionState{}); err != nil || got == nil {
		t.Fatalf("own ticket: %v, %v", got, err)
	}
	for i := range ticket {
		bad := bytes.Clone(ticket)
		bad[i] ^= 1
		if got, err := tk.unwrap(bad, tls.ConnectionState{}); got != nil || err != nil {
			t.Fatalf("ticket altered at byte %d: %v, %v; want ignored", i, got, err)
		}
	}
	for _, bad := range [][]byte{nil, ticket[:10], ticket[:ticketHeader]} {
		if got, err := tk.unwrap(bad, tls.ConnectionState{}); got != nil || err != nil {
			t.Fatalf("short ticket: %v, %v; want ignored", got, err)
		}
	}
	// Another store's keys: a ticket from another edge is not ours.
	other, _ := openStore(t)
	tk2, _ := NewTickets(TicketConfig{Store: other, Seal: testSealer(t), Now: func() time.Time { return now }})
	if err := tk2.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, err := tk2.unwrap(ticket, tls.ConnectionState{}); got != nil || err != nil {
		t.Fatalf("another edge's ticket: %v, %v; want ignored", got, err)
	}
}

// sessionState is a real server session state, taken from a handshake.
func sessionState(t *testing.T) *tls.SessionState {
	t.Helper()
	got := make(chan *tls.SessionState, 1)
	ca := newTestCA(t)
	srvCfg := &tls.Config{
		Certificates: []tls.Certificate{ca.certificate(t, "a.example", "")},
		WrapSession: func(_ tls.ConnectionState, ss *tls.SessionState) ([]byte, error) {
			got <- ss
			return []byte("x"), nil
		},
	}
	c, s := net.Pipe()
	go func() {
		sc := tls.Server(s, srvCfg)
		_ = sc.Handshake()
		_, _ = sc.Write([]byte("x"))
		// The pipe itself, not the TLS close: a close_notify on a
		// synchronous pipe waits for a reader that has gone.
		_ = s.Close()
	}()
	cc := tls.Client(c, &tls.Config{ServerName: "a.example", RootCAs: ca.pool(), ClientSessionCache: tls.NewLRUClientSessionCache(1)})
	_, _ = cc.Read(make([]byte, 1))
	_ = cc.Close()
	select {
	case ss := <-got:
		return ss
	case <-time.After(10 * time.Second):
		t.Fatal("no session state was made")
		return nil
	}
}
