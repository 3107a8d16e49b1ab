package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesWithMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	for _, data := range []string{"first", "second"} {
		if err := Write(path, []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != data {
			t.Fatalf("read %q, %v; want %q", got, err, data)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, %v; want 0640", fi.Mode(), err)
	}
	assertNoTemp(t, dir, "key")
}

func TestCreateNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	if err := Create(path, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := Create(path, []byte("theirs"), 0o600)
	if !errors.Is(err, os.ErrExist) {
		t.Fatalf("a second Create: %v, want os.ErrExist", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "mine" {
		t.Fatalf("the file holds %q after a refused Create, want the first one's", got)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	assertNoTemp(t, dir, "key")
}

func TestWriteIntoMissingFolderFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent", "key")
	if err := Write(path, []byte("x"), 0o600); err == nil {
		t.Fatal("a write into a folder that does not exist succeeded")
	}
}

// assertNoTemp fails if a temporary file is left beside the written one.
func assertNoTemp(t *testing.T, dir, want string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != want {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("the folder holds %v, want only %s", names, want)
	}
}
