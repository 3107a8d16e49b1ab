// Package apikey holds the controller's edge API key and keeps it current.
//
// The chart mounts the key's Secret as a volume, and kubelet replaces the
// file when the Secret changes, by an atomic swap of the ..data symlink in
// the mount directory. A Source reads the file once at start, then re-reads
// it whenever the directory changes (fsnotify) and, in case an event is lost
// (inotify limits, file systems that send none), every Interval as well: the
// read is one small file, so the fallback costs nothing worth saving, and
// the two together need no reasoning about which events a swap produces.
// Every edge client asks Key on each call, so a new key is used at once,
// with no restart.
package apikey

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"

	"code.tuna.am/tuna/k8s-operator/edge/keys"
)

// DefaultInterval is how often a Source re-reads its file even without a
// change event: the bound on noticing a rotation once kubelet has written
// the new file.
const DefaultInterval = 10 * time.Second

// Source is the operator's API key, swapped atomically when it rotates.
// Its zero value is not usable: see Static and FromFile.
type Source struct {
	path string
	// Interval is how often Start re-reads the file without an event
	// (default DefaultInterval). Set it before Start.
	Interval time.Duration
	log      logr.Logger
	key      atomic.Pointer[string]

	mu sync.Mutex
	// rejected is a hash of the last content refused, so a bad file is
	// warned about once, not on every re-read.
	rejected [sha256.Size]byte
	// watch is false in tests of the periodic re-read alone.
	watch bool
}

// Static is a key that never changes (TUNA_API_KEY from the environment).
func Static(key string) *Source {
	s := &Source{}
	s.key.Store(&key)
	return s
}

// FromFile reads the key from path; it fails if the file cannot be read or
// does not hold an API key, since the controller cannot work without one.
func FromFile(path string, log logr.Logger) (*Source, error) {
	s := &Source{path: path, Interval: DefaultInterval, log: log, watch: true}
	key, err := read(path)
	if err != nil {
		return nil, fmt.Errorf("the operator's API key file %s (--api-key-file): %w", path, err)
	}
	s.key.Store(&key)
	log.Info("using the operator's API key from a file", "path", path, "keyID", ID(key))
	return s, nil
}

// Key returns the key in use now. Safe for concurrent use.
func (s *Source) Key() string { return *s.key.Load() }

// ID is the public id of an API key (the middle of tuna_<id>_<secret>), the
// only part of it that may be logged; "" if key is not one.
func ID(key string) string {
	k, err := keys.Parse(key)
	if err != nil {
		return ""
	}
	return k.ID
}

// errEmpty and errNotAPIKey name why a file's content is refused; the
// content itself is never part of an error, as it may be a key.
var (
	errEmpty     = errors.New("the file is empty")
	errNotAPIKey = errors.New("the file does not hold an API key (tuna_<id>_<secret>)")
)

// read returns the API key in path. Kubelet's Secret files end without a
// newline, but a hand-written one may have it: surrounding space is trimmed.
func read(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading: %w", err)
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", errEmpty
	}
	if k, err := keys.Parse(key); err != nil || k.Kind != keys.KindAPI {
		return "", errNotAPIKey
	}
	return key, nil
}

// NeedLeaderElection is false: every controller replica keeps its key
// current, so a new leader starts with the rotated key.
func (s *Source) NeedLeaderElection() bool { return false }

// Start keeps the key current until ctx ends. A Static source has nothing to
// watch and just waits.
func (s *Source) Start(ctx context.Context) error {
	if s.path == "" {
		<-ctx.Done()
		return nil
	}
	var events <-chan fsnotify.Event
	var errs <-chan error
	if s.watch {
		w, err := s.watcher()
		if err != nil {
			s.log.Info("WARNING: cannot watch the API key's directory; re-reading it periodically only", "path", s.path, "interval", s.interval().String(), "error", err.Error())
		} else {
			defer func() { _ = w.Close() }() // stops the watch; nothing to flush
			events, errs = w.Events, w.Errors
		}
	}
	// The file may have changed between FromFile and the watch.
	s.poll()
	tick := time.NewTicker(s.interval())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-events:
			s.poll()
		case err := <-errs:
			s.log.Info("WARNING: watching the API key's directory", "error", err.Error())
		case <-tick.C:
			s.poll()
		}
	}
}

// watcher watches the file's directory, not the file: kubelet swaps the
// ..data symlink there, and a watch on the old file would follow it to the
// removed directory and go silent.
func (s *Source) watcher() (*fsnotify.Watcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("creating a watcher: %w", err)
	}
	if err := w.Add(filepath.Dir(s.path)); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("watching %s: %w", filepath.Dir(s.path), err)
	}
	return w, nil
}

func (s *Source) interval() time.Duration {
	if s.Interval > 0 {
		return s.Interval
	}
	return DefaultInterval
}

// poll re-reads the file for Run: reload logs a rejected content itself,
// once per problem, and the key in use stays.
func (s *Source) poll() { _, _ = s.reload() }

// reload re-reads the file and swaps in a new valid key. An unreadable,
// empty or malformed file keeps the key in use: a half-made rotation must
// not stop the operator. It reports whether the key changed.
func (s *Source) reload() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.Key()
	key, err := read(s.path)
	if err != nil {
		// Hash the error's text for a read error, the content otherwise:
		// either way, the same problem is logged once.
		sum := sha256.Sum256([]byte(err.Error() + "\x00" + contentOf(s.path)))
		if sum != s.rejected {
			s.rejected = sum
			s.log.Info("WARNING: ignoring the API key file's new content, keeping the key in use", "path", s.path, "reason", err.Error(), "keyID", ID(old))
		}
		return false, err
	}
	s.rejected = [sha256.Size]byte{}
	if key == old {
		return false, nil
	}
	s.key.Store(&key)
	s.log.Info("picked up a new operator API key", "keyID", ID(key), "previousKeyID", ID(old))
	return true, nil
}

// contentOf is the file's content, only ever hashed.
func contentOf(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
