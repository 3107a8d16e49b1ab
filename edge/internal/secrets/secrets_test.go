package secrets_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/internal/secrets"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
)

func newKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, secrets.KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func ring(t *testing.T, keys ...[]byte) *secrets.Keyring {
	t.Helper()
	r, err := secrets.NewKeyring(keys)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func openStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestSealOpen(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	r := ring(t, k1)
	id, nonce, ct, err := r.Seal("team-a/db", []byte("hunter2"))
	if err != nil || id != secrets.KeyID(k1) || len(id) != 8 {
		t.Fatalf("seal: %s %v", id, err)
	}
	if bytes.Contains(ct, []byte("hunter2")) {
		t.Fatal("ciphertext holds the plaintext")
	}
	if got, err := r.Open("team-a/db", id, nonce, ct); err != nil || string(got) != "hunter2" {
		t.Fatalf("open: %q %v", got, err)
	}
	// The name is bound: the same ciphertext under another name fails.
	if _, err := r.Open("team-b/db", id, nonce, ct); err == nil {
		t.Fatal("a ciphertext opened under another name")
	}
	// A wrong key with the right id cannot exist; a different ring fails.
	other := ring(t, k2)
	if _, err := other.Open("team-a/db", id, nonce, ct); !errors.As(err, new(*secrets.MissingKeyError)) {
		t.Fatalf("open with a ring lacking the key: %v", err)
	}
	// Tampering is detected.
	ct[0] ^= 1
	if _, err := r.Open("team-a/db", id, nonce, ct); err == nil {
		t.Fatal("a tampered ciphertext opened")
	}
}

func TestParseKeys(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	b1, b2 := base64.StdEncoding.EncodeToString(k1), base64.StdEncoding.EncodeToString(k2)
	keys, err := secrets.ParseKeys("# comment\n" + b1 + "\n\n" + b2 + "\n")
	if err != nil || len(keys) != 2 || !bytes.Equal(keys[0], k1) {
		t.Fatalf("file form: %d keys, %v", len(keys), err)
	}
	if keys, err = secrets.ParseKeys(b2 + "," + b1); err != nil || !bytes.Equal(keys[0], k2) {
		t.Fatalf("comma form: %v", err)
	}
	if _, err := secrets.ParseKeys("not base64!"); err == nil || strings.Contains(err.Error(), "not base64!") {
		t.Fatalf("bad key: %v (must not echo key material)", err)
	}
	short, _ := secrets.ParseKeys(base64.StdEncoding.EncodeToString([]byte("short")))
	if _, err := secrets.NewKeyring(short); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
}

func TestGenerateKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets.key")
	key, err := secrets.GenerateKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	keys, err := secrets.LoadKeyFile(path)
	if err != nil || len(keys) != 1 || !bytes.Equal(keys[0], key) {
		t.Fatalf("reload: %v", err)
	}
	if _, err := secrets.GenerateKeyFile(path); err == nil {
		t.Fatal("an existing key file was overwritten")
	}
}

func TestManagerVersions(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	var count int
	m, _, err := secrets.Open(st, ring(t, newKey(t)), secrets.Options{Max: 2, Count: func(n int) { count = n }})
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	changed := m.Changed()
	meta, created, err := m.Put("a", map[string][]byte{"k": []byte("v1")}, &zero)
	if err != nil || !created || meta.Version != 1 || count != 1 {
		t.Fatalf("create: %+v %v %v count %d", meta, created, err, count)
	}
	select {
	case <-changed:
	default:
		t.Fatal("a write did not wake waiters")
	}
	// Identical data: nothing changes, nobody is woken.
	changed = m.Changed()
	again, created, err := m.Put("a", map[string][]byte{"k": []byte("v1")}, nil)
	if err != nil || created || again.Version != 1 || !again.UpdatedAt.Equal(meta.UpdatedAt) {
		t.Fatalf("identical put: %+v %v", again, err)
	}
	select {
	case <-changed:
		t.Fatal("an identical put woke waiters")
	default:
	}
	// expected_version: 0 for an existing secret, a stale version.
	var vc *secrets.VersionConflictError
	if _, _, err := m.Put("a", map[string][]byte{"k": []byte("v2")}, &zero); !errors.As(err, &vc) || vc.Have != 1 {
		t.Fatalf("expected 0 on an existing secret: %v", err)
	}
	five := int64(5)
	if _, _, err := m.Put("a", map[string][]byte{"k": []byte("v2")}, &five); !errors.As(err, &vc) {
		t.Fatalf("stale expected version: %v", err)
	}
	one := int64(1)
	v2, _, err := m.Put("a", map[string][]byte{"k": []byte("v2"), "b": nil}, &one)
	if err != nil || v2.Version != 2 || !v2.CreatedAt.Equal(meta.CreatedAt) || strings.Join(v2.Keys, ",") != "b,k" {
		t.Fatalf("conditional update: %+v %v", v2, err)
	}
	_, data, err := m.Get("a")
	if err != nil || string(data["k"]) != "v2" || len(data) != 2 {
		t.Fatalf("get: %v %v", data, err)
	}
	// The limit counts secrets, not writes.
	if _, _, err := m.Put("b", map[string][]byte{"k": nil}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Put("c", map[string][]byte{"k": nil}, nil); !errors.As(err, new(*secrets.LimitError)) {
		t.Fatalf("over the limit: %v", err)
	}
	if err := m.Delete("b"); err != nil || count != 1 {
		t.Fatalf("delete: %v count %d", err, count)
	}
	if err := m.Delete("b"); !secrets.IsNotFound(err) {
		t.Fatalf("delete twice: %v", err)
	}
}

func TestRotationAtOpen(t *testing.T) {
	dir := t.TempDir()
	old, next := newKey(t), newKey(t)
	st := openStore(t, dir)
	m, _, err := secrets.Open(st, ring(t, old), secrets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"x", "y/z"} {
		if _, _, err := m.Put(n, map[string][]byte{"k": []byte("value-of-" + n)}, nil); err != nil {
			t.Fatal(err)
		}
	}

	// Only the new key: the edge must refuse, naming the missing key.
	_, _, err = secrets.Open(st, ring(t, next), secrets.Options{})
	if err == nil || !strings.Contains(err.Error(), secrets.KeyID(old)) {
		t.Fatalf("open without the old key: %v", err)
	}

	// New key first, old key after: everything moves to the new key.
	_, n, err := secrets.Open(st, ring(t, next, old), secrets.Options{})
	if err != nil || n != 2 {
		t.Fatalf("rotation: %d re-encrypted, %v", n, err)
	}
	ids, _ := secrets.StoredKeyIDs(st)
	if len(ids) != 1 || ids[0] != secrets.KeyID(next) {
		t.Fatalf("key ids after rotation: %v", ids)
	}
	if _, n, err = secrets.Open(st, ring(t, next, old), secrets.Options{}); err != nil || n != 0 {
		t.Fatalf("second open: %d %v", n, err)
	}
	// The old key can go now.
	m, _, err = secrets.Open(st, ring(t, next), secrets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, data, err := m.Get("y/z"); err != nil || string(data["k"]) != "value-of-y/z" {
		t.Fatalf("after rotation: %v %v", data, err)
	}
	// Versions are unchanged by re-encryption.
	if meta, _, _ := m.Get("x"); meta.Version != 1 {
		t.Fatalf("re-encryption changed the version: %+v", meta)
	}
	_ = st.Close()
}

func TestValidation(t *testing.T) {
	for _, ok := range []string{"a", "team-a/db", "a.b_c-d/e/f", strings.Repeat("a", 253)} {
		if err := secrets.CheckName(ok); err != nil {
			t.Errorf("CheckName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "A", "-a", "a-", "a//b", "a/../b", "../a", "/a", "a/", strings.Repeat("a", 254), "a b", "é"} {
		if err := secrets.CheckName(bad); err == nil {
			t.Errorf("CheckName(%q) accepted", bad)
		}
	}
	for _, ok := range []string{"team-a/", "team-a-", "t"} {
		if err := secrets.CheckPrefix(ok); err != nil {
			t.Errorf("CheckPrefix(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"/", "Team", "a//", "../"} {
		if err := secrets.CheckPrefix(bad); err == nil {
			t.Errorf("CheckPrefix(%q) accepted", bad)
		}
	}
	if err := secrets.CheckData(nil); err == nil {
		t.Error("empty data accepted")
	}
	if err := secrets.CheckData(map[string][]byte{"a/b": nil}); err == nil {
		t.Error("key with '/' accepted")
	}
	big := map[string][]byte{"a": make([]byte, secrets.MaxValueBytes), "b": {1}}
	if err := secrets.CheckData(big); !errors.As(err, new(*secrets.TooLargeError)) {
		t.Errorf("oversize data: %v", err)
	}
	if err := secrets.CheckData(map[string][]byte{"a": make([]byte, secrets.MaxValueBytes)}); err != nil {
		t.Errorf("data at the limit: %v", err)
	}
}
