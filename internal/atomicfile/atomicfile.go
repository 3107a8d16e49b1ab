// Package atomicfile writes files that readers, and the next start after a
// crash, see whole or not at all: the data goes to a temporary file in the
// same folder, is synced, and only then takes the file's name. The edge
// keeps its keys and its clients' settings in such files; a half-written
// key is one the next start cannot parse, or, worse, one it takes as
// already there.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces path with data, with mode: readers see the old file or the
// new one, never a part of either.
func Write(path string, data []byte, mode os.FileMode) error {
	tmp, err := temp(path, data, mode)
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp) }() // renamed into place on success: harmless then
	return os.Rename(tmp, path)
}

// Create writes data to path, with mode, only if path does not exist: the
// error wraps os.ErrExist if it does, also when another process made it
// meanwhile (the name is taken with a hard link, which never replaces).
func Create(path string, data []byte, mode os.FileMode) error {
	tmp, err := temp(path, data, mode)
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp) }()
	return os.Link(tmp, path)
}

// temp writes data to a synced temporary file beside path, made with mode
// 0600 and then given mode, and returns its name.
func temp(path string, data []byte, mode os.FileMode) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	werr := f.Chmod(mode)
	if werr == nil {
		_, werr = f.Write(data)
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("writing %s: %w", path, werr)
	}
	return f.Name(), nil
}
