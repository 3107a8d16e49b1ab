package server

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/internal/access"
	"code.tuna.am/tuna/k8s-operator/edge/internal/secrets"
	"code.tuna.am/tuna/k8s-operator/edge/metrics"
)

// secretsKeyFileName is the generated key file in the data dir.
const secretsKeyFileName = "secrets.key"

// SecretsKeyPath is where the edge generates its secrets key when none is
// configured.
func SecretsKeyPath(dataDir string) string { return filepath.Join(dataDir, secretsKeyFileName) }

// openSecrets loads the keyring and opens the secrets, re-encrypting
// those and the HTTPS listener's keys sealed with an older key, and
// returns how many it re-encrypted: prepending a new key and restarting
// is the whole rotation.
func (e *Edge) openSecrets() (*secrets.Manager, int, error) {
	ring, err := e.loadKeyring()
	if err != nil {
		return nil, 0, err
	}
	// The HTTPS listener's shared state (ticket keys, certificates' private
	// keys) and the access records are sealed with the same keyring.
	e.ring = ring
	m, n, err := secrets.Open(e.st, ring, secrets.Options{
		Max:     e.cfg.MaxSecrets,
		Count:   e.m.Secrets,
		Refused: func() { e.m.LimitRefused(metrics.LimitSecrets) },
	})
	if err != nil {
		return nil, 0, fmt.Errorf("secrets: %w", err)
	}
	// The HTTPS listener's keys are resealed here too; the access records
	// when they are opened (openAccess). logKeyUse then says which keys
	// still seal anything.
	nTLS, err := e.st.ResealTLS(ring.Reseal)
	if err != nil {
		return nil, 0, fmt.Errorf("re-encrypting the HTTPS keys (certificates, session tickets, ACME account) with the primary key %s: %w",
			ring.Primary(), err)
	}
	return m, n + nTLS, nil
}

// logKeyUse logs the keyring's state once every sealed record is resealed
// (openSecrets, openAccess): the keys other than the primary that still
// seal a record, and, when none does, that the older keys may go. That
// line is what the rotation procedure in docs/edge.md waits for.
func (e *Edge) logKeyUse(resealed int) error {
	ids, err := secrets.StoredKeyIDs(e.st)
	if err != nil {
		return err
	}
	left := 0
	for _, id := range ids {
		if id != e.ring.Primary() {
			left++
		}
	}
	e.log.Info("secrets encryption key loaded", "primary_key", e.ring.Primary(), "keys", strings.Join(e.ring.IDs(), ","),
		"re_encrypted", resealed, "sealed_with_other_keys", left)
	if older := e.ring.IDs()[1:]; len(older) > 0 && left == 0 {
		e.log.Info("no secret is encrypted with a non-primary key any more: they can be removed from the key file",
			"unused_keys", strings.Join(older, ","))
	}
	return nil
}

// openAccess loads the access keys and policies (access.Open), sealed by
// the secrets keyring.
func (e *Edge) openAccess() (*access.Keeper, error) {
	idp := &http.Client{Timeout: 10 * time.Second}
	if e.cfg.AccessIdPCAFile != "" {
		c, err := httpClientTrusting(e.cfg.AccessIdPCAFile)
		if err != nil {
			return nil, fmt.Errorf("config: AccessIdPCAFile: %w", err)
		}
		idp.Transport = c.Transport
	}
	eng := access.New(access.Config{IdPClient: idp, IdPRecheck: e.cfg.AccessIdPRecheck, Logger: e.log})
	k, n, err := access.Open(e.st, e.ring, eng)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		e.log.Info("access records re-encrypted with the primary secrets key", "records", n)
	}
	return k, nil
}

func (e *Edge) loadKeyring() (*secrets.Keyring, error) {
	switch {
	case len(e.cfg.SecretsKeys) > 0:
		keys, err := secrets.ParseKeys(strings.Join(e.cfg.SecretsKeys, ","))
		if err != nil {
			return nil, fmt.Errorf("TUNA_EDGE_SECRETS_KEY: %w", err)
		}
		return secrets.NewKeyring(keys)
	case e.cfg.SecretsKeyFile != "":
		// A configured file must exist: generating one where a mounted
		// key was expected would hide a broken mount.
		keys, err := secrets.LoadKeyFile(e.cfg.SecretsKeyFile)
		if err != nil {
			return nil, err
		}
		return secrets.NewKeyring(keys)
	}
	path := SecretsKeyPath(e.cfg.DataDir)
	keys, err := secrets.LoadKeyFile(path)
	if err == nil {
		return secrets.NewKeyring(keys)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	// A new key is right only for a database without secrets: for one
	// with secrets, the lost file is what must come back.
	if ids, err := secrets.StoredKeyIDs(e.st); err != nil {
		return nil, err
	} else if len(ids) > 0 {
		return nil, fmt.Errorf("secrets key file %s is missing, but the database holds secrets encrypted with key(s) %s: "+
			"restore the file (or pass the keys with --secrets-key-file or TUNA_EDGE_SECRETS_KEY)", path, strings.Join(ids, ", "))
	}
	key, err := secrets.GenerateKeyFile(path)
	if err != nil {
		return nil, err
	}
	e.log.Info("generated the secrets encryption key; back it up with the database: secrets cannot be read without it",
		"file", path, "key", secrets.KeyID(key))
	return secrets.NewKeyring([][]byte{key})
}
