package server

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"code.tuna.am/tuna/k8s-operator/edge/internal/third_party/xcrypto/ssh"

	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
	"code.tuna.am/tuna/k8s-operator/internal/atomicfile"
)

// hostKeyFileName is the host key's file in the data dir when no path is
// configured.
const hostKeyFileName = "ssh_host_ed25519_key"

// loadHostKey returns the SSH host key from its file. Agents pin the key,
// so it must never change: on first start it is generated, and an edge
// upgraded from one that kept the key in the database moves that same key
// into the file, then removes it from the database, so a copy of edge.db
// holds no usable secret.
func loadHostKey(st *store.Store, path string, log *slog.Logger) (ssh.Signer, error) {
	legacy, err := st.LegacyHostKey()
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("reading the SSH host key from the database: %w", err)
	}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if legacy != nil && !bytes.Equal(legacy, data) {
			// Only a host key file given by hand can differ: the file is
			// what the operator asked for, so it wins.
			log.Warn("the SSH host key file differs from the key the database held; using the file: agents pinned to the old key need the new one from GET /v1/edge",
				"file", path)
		}
	case errors.Is(err, os.ErrNotExist):
		data = legacy
		if data == nil {
			if data, err = newHostKey(); err != nil {
				return nil, err
			}
		}
		if err := writeKeyFile(path, data); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("reading SSH host key file: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("parsing SSH host key file %s: %w", path, err)
	}
	if legacy != nil {
		// The file is written and parses: only now is the database's copy
		// redundant.
		if err := st.DropLegacyHostKey(); err != nil {
			return nil, fmt.Errorf("removing the SSH host key from the database after moving it to %s: %w", path, err)
		}
		log.Info("moved the SSH host key out of the database", "file", path)
	}
	return signer, nil
}

func newHostKey() ([]byte, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating SSH host key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "tuna-edge host key")
	if err != nil {
		return nil, fmt.Errorf("encoding SSH host key: %w", err)
	}
	return pem.EncodeToMemory(block), nil
}

// writeKeyFile writes data to path with mode 0600, atomically: a crash
// leaves either no file or the whole key, never a truncated one that the
// next start would fail to parse.
func writeKeyFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the host key's directory %s: %w", dir, err)
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return fmt.Errorf("writing SSH host key file %s: %w", path, err)
	}
	return nil
}

// GenerateHostKeyFile writes a new SSH host key to path (mode 0600),
// refusing to replace an existing file: for a cluster, whose nodes all get
// a copy of one key.
func GenerateHostKeyFile(path string) error {
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("%s exists: a host key is never replaced by accident (agents pin it)", path)
	}
	data, err := newHostKey()
	if err != nil {
		return err
	}
	return writeKeyFile(path, data)
}
