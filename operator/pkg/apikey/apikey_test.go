package apikey

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
)

const (
	keyA = "tuna_aaaaaaaaaaaaaaaa_secretone"
	keyB = "tuna_bbbbbbbbbbbbbbbb_secrettwo"
	keyC = "tuna_cccccccccccccccc_secretthree"
)

// secretVolume lays out a directory as kubelet does for a Secret volume:
// the file is a symlink through ..data to a timestamped directory, and an
// update makes a new directory and swaps ..data atomically.
type secretVolume struct {
	t   *testing.T
	dir string
	n   atomic.Int32
}

func newSecretVolume(t *testing.T, content string) *secretVolume {
	v := &secretVolume{t: t, dir: t.TempDir()}
	v.write(content)
	require.NoError(t, os.Symlink(filepath.Join("..data", "api-key"), filepath.Join(v.dir, "api-key")))
	return v
}

func (v *secretVolume) path() string { return filepath.Join(v.dir, "api-key") }

// write makes a new timestamped directory with content and points ..data
// at it by renaming a fresh symlink over the old one, then removes the
// previous directory, as kubelet's atomic writer does.
func (v *secretVolume) write(content string) {
	t := v.t
	n := v.n.Add(1)
	ts := fmt.Sprintf("..2026_12_02_18_00_%02d.%d", n, n)
	require.NoError(t, os.Mkdir(filepath.Join(v.dir, ts), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(v.dir, ts, "api-key"), []byte(content), 0o644))
	tmp := filepath.Join(v.dir, "..data_tmp")
	require.NoError(t, os.Symlink(ts, tmp))
	require.NoError(t, os.Rename(tmp, filepath.Join(v.dir, "..data")))
	if n > 1 {
		require.NoError(t, os.RemoveAll(filepath.Join(v.dir, fmt.Sprintf("..2026_12_02_18_00_%02d.%d", n-1, n-1))))
	}
}

// run starts s and stops it when the test ends.
func run(t *testing.T, s *Source) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
}

func serves(t *testing.T, s *Source, want string) {
	t.Helper()
	require.Eventually(t, func() bool { return s.Key() == want }, 10*time.Second, 5*time.Millisecond,
		"the source never served key %s (serves %s)", ID(want), ID(s.Key()))
}

func TestRotationBySymlinkSwapIsNoticedByTheWatch(t *testing.T) {
	v := newSecretVolume(t, keyA+"\n")
	s, err := FromFile(v.path(), logr.Discard())
	require.NoError(t, err)
	require.Equal(t, keyA, s.Key(), "surrounding space is trimmed")
	// No periodic re-read within the test's patience: only the directory
	// watch can notice the swap.
	s.Interval = time.Hour
	run(t, s)

	v.write(keyB)
	serves(t, s, keyB)
	v.write(keyC)
	serves(t, s, keyC)
}

func TestRotationIsNoticedByThePeriodicReRead(t *testing.T) {
	v := newSecretVolume(t, keyA)
	s, err := FromFile(v.path(), logr.Discard())
	require.NoError(t, err)
	s.watch, s.Interval = false, 10*time.Millisecond
	run(t, s)

	v.write(keyB)
	serves(t, s, keyB)
}

func TestEmptyOrMalformedContentKeepsTheKey(t *testing.T) {
	v := newSecretVolume(t, keyA)
	s, err := FromFile(v.path(), logr.Discard())
	require.NoError(t, err)

	for _, bad := range []string{"", "  \n", "not-a-key", "tunt_aaaaaaaaaaaaaaaa_tunnelkey", "tuna_short_x"} {
		v.write(bad)
		changed, err := s.reload()
		require.Error(t, err, "content %q", bad)
		require.False(t, changed)
		require.NotContains(t, err.Error(), "tunnelkey", "the refused content must not be in the error")
		require.Equal(t, keyA, s.Key(), "content %q replaced the key", bad)
	}
	v.write(keyB)
	changed, err := s.reload()
	require.NoError(t, err)
	require.True(t, changed)
	require.Equal(t, keyB, s.Key())
}

func TestAMissingFileKeepsTheKey(t *testing.T) {
	v := newSecretVolume(t, keyA)
	s, err := FromFile(v.path(), logr.Discard())
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(v.dir, "..data")))
	_, err = s.reload()
	require.True(t, errors.Is(err, os.ErrNotExist), "err = %v", err)
	require.Equal(t, keyA, s.Key())
}

func TestFromFileRefusesABadFile(t *testing.T) {
	for name, content := range map[string]string{"empty": "", "malformed": "hello", "tunnel key": "tunt_aaaaaaaaaaaaaaaa_x"} {
		v := newSecretVolume(t, content)
		_, err := FromFile(v.path(), logr.Discard())
		require.Error(t, err, name)
		require.Contains(t, err.Error(), "--api-key-file", name)
	}
	_, err := FromFile(filepath.Join(t.TempDir(), "absent"), logr.Discard())
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestIDIsThePublicPartOnly(t *testing.T) {
	require.Equal(t, "aaaaaaaaaaaaaaaa", ID(keyA))
	require.Equal(t, "", ID("garbage"))
}
