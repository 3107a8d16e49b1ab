package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"code.tuna.am/tuna/k8s-operator/internal/atomicfile"
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

// writeClientConfig records how to reach the API that now listens. It is a
// convenience of the CLI: an edge that cannot write it (a read-only data
// directory) says so and serves on.
func (e *Edge) writeClientConfig() {
	path := ClientConfigPath(e.cfg.DataDir)
	data, err := json.MarshalIndent(ClientConfig{APIURL: e.apiURL, APIFingerprint: e.APIFingerprint()}, "", "  ")
	if err == nil {
		err = os.MkdirAll(e.cfg.DataDir, 0o700) // a cluster's node keeps its state in etcd and may have made no data dir
	}
	if err == nil {
		err = atomicfile.Write(path, append(data, '\n'), 0o644)
	}
	if err != nil {
		e.log.Warn("cannot write the client config: tuna-edge keys, secrets and owners on this host need --api-url and --api-fingerprint",
			"file", path, "err", err)
	}
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
