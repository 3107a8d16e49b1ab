package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// clientConfigFile is the file, in the data directory, where a running
// edge says how to reach its API: the tuna-edge client commands (keys,
// secrets, owners) on the edge's host read it, so they need no flags.
const clientConfigFile = "api-client.json"

// ClientConfigPath is where the edge of dataDir writes its ClientConfig.
func ClientConfigPath(dataDir string) string { return filepath.Join(dataDir, clientConfigFile) }

// ClientConfig tells a client on the edge's host how to reach the API: its
// URL (a wildcard listen address becomes 127.0.0.1) and the fingerprint of
// the certificate it serves. It holds no key.
type ClientConfig struct {
	APIURL         string `json:"api_url"`
	APIFingerprint string `json:"api_fingerprint,omitempty"`
}

// writeClientConfig records how to reach the API that now listens.
func (e *Edge) writeClientConfig() error {
	data, err := json.MarshalIndent(ClientConfig{APIURL: e.apiURL, APIFingerprint: e.APIFingerprint()}, "", "  ")
	if err != nil {
		return err
	}
	path := ClientConfigPath(e.cfg.DataDir)
	if err := writeFileAtomic(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// ReadClientConfig reads what the edge of dataDir wrote when it started.
func ReadClientConfig(dataDir string) (ClientConfig, error) {
	var c ClientConfig
	data, err := os.ReadFile(ClientConfigPath(dataDir))
	if errors.Is(err, os.ErrNotExist) {
		return c, fmt.Errorf("%s does not exist: an edge writes it when it starts with --data-dir %s", ClientConfigPath(dataDir), dataDir)
	}
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("%s is not an edge's client config: %w", ClientConfigPath(dataDir), err)
	}
	if c.APIURL == "" {
		return c, fmt.Errorf("%s names no api_url: start the edge again to rewrite it", ClientConfigPath(dataDir))
	}
	return c, nil
}
