package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/edge/server"
)

// apiFlags point a client command (keys, secrets, owners) at a running
// edge. On the edge's host nothing needs saying: the edge writes its API's
// URL and certificate pin to <data-dir>/api-client.json when it starts
// (server.ClientConfig), and the key may come from a file such as serve's
// --bootstrap-key-file. Elsewhere, flags or their TUNA_EDGE_* variables
// say it. Nothing here opens the database.
type apiFlags struct {
	url, key, keyFile, fingerprint, caFile, dataDir, output string
	// dataDirSet: --data-dir (or TUNA_EDGE_DATA_DIR) was given, so the
	// directory must be an edge's.
	dataDirSet bool
}

const apiFlagsHelp = "On the edge's host the commands find the API in <data-dir>/api-client.json, which the edge " +
	"writes when it starts, and the key in --api-key-file (e.g. the edge's --bootstrap-key-file); elsewhere pass " +
	"--api-url and --api-fingerprint (or --api-ca-file), or set TUNA_EDGE_API_URL and TUNA_EDGE_API_FINGERPRINT."

// defaultDataDir is the edge's data directory unless told otherwise.
const defaultDataDir = "/var/lib/tuna-edge"

func (f *apiFlags) register(cmd *cobra.Command) {
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.url, "api-url", "", "the edge's control API, e.g. https://edge.example.com:8443 (default: from <data-dir>/api-client.json)")
	pf.StringVar(&f.key, "api-key", "", "API key (default $TUNA_EDGE_API_KEY, then $TUNA_API_KEY, then --api-key-file)")
	pf.StringVar(&f.keyFile, "api-key-file", "", "a file holding the API key, e.g. the edge's --bootstrap-key-file")
	pf.StringVar(&f.fingerprint, "api-fingerprint", "", "pin the API's certificate (sha256:HEX, as tuna-edge api-fingerprint prints it)")
	pf.StringVar(&f.caFile, "api-ca-file", "", "PEM bundle the API's certificate must chain to")
	pf.StringVar(&f.dataDir, "data-dir", defaultDataDir, "the data directory of an edge on this host, whose api-client.json says how to reach its API")
	pf.StringVarP(&f.output, "output", "o", "text", "text or json")
}

// preRun fills the flags from the environment and checks -o.
func (f *apiFlags) preRun(cmd *cobra.Command, _ []string) error {
	if err := applyEnv(cmd.Flags()); err != nil {
		return err
	}
	env, _ := os.LookupEnv(envName("data-dir"))
	f.dataDirSet = cmd.Flags().Changed("data-dir") || env != ""
	if f.output != "text" && f.output != "json" {
		return fmt.Errorf("-o %q: want text or json", f.output)
	}
	return nil
}

// apiKey is the key to call with: the flag or its variable, TUNA_API_KEY,
// then the key file.
func (f *apiFlags) apiKey() (string, error) {
	key := f.key
	if key == "" {
		key = os.Getenv("TUNA_API_KEY")
	}
	if key == "" && f.keyFile != "" {
		b, err := os.ReadFile(f.keyFile)
		if err != nil {
			return "", fmt.Errorf("--api-key-file: %w", err)
		}
		key = strings.TrimSpace(string(b))
	}
	if key == "" {
		return "", errors.New("no API key: pass --api-key or --api-key-file (e.g. the edge's --bootstrap-key-file), or set TUNA_EDGE_API_KEY or TUNA_API_KEY")
	}
	return key, nil
}

func (f *apiFlags) client() (*client.Client, error) {
	key, err := f.apiKey()
	if err != nil {
		return nil, err
	}
	var trust client.Trust
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, fmt.Errorf("--api-ca-file: %w", err)
		}
		trust.CABundle = pem
	}
	if f.fingerprint != "" {
		fp, err := apiwire.ParseFingerprint(f.fingerprint)
		if err != nil {
			return nil, fmt.Errorf("--api-fingerprint: %w", err)
		}
		trust.Fingerprint = fp
	}
	url := f.url
	if url == "" || f.dataDirSet || (trust.IsZero() && strings.HasPrefix(strings.ToLower(url), "https://")) {
		cfg, err := f.local(url == "")
		if err != nil {
			return nil, err
		}
		if url == "" {
			url = cfg.APIURL
		}
		if trust.IsZero() && strings.HasPrefix(strings.ToLower(url), "https://") {
			trust.Fingerprint = cfg.APIFingerprint
		}
	}
	return client.New(url, key, client.WithTrust(trust)), nil
}

// local reads what the edge of the data directory says about its API.
// A data directory that was named but is no edge's is an error, whatever
// else was given: the command never makes one up.
func (f *apiFlags) local(needURL bool) (server.ClientConfig, error) {
	cfg, err := server.ReadClientConfig(f.dataDir)
	switch {
	case err == nil:
		return cfg, nil
	case f.dataDirSet:
		return cfg, fmt.Errorf("--data-dir %s is not the data directory of an edge that has started (%w): give the edge's --data-dir, "+
			"or, away from the edge's host, --api-url with --api-fingerprint or --api-ca-file", f.dataDir, err)
	case needURL:
		return cfg, fmt.Errorf("no edge API to call: pass --api-url (or set TUNA_EDGE_API_URL), or --data-dir of the edge on this host: %w", err)
	}
	// An older edge wrote no client config: its generated certificate is
	// the pin.
	cert, cerr := server.ReadAPICertificate(f.dataDir, "")
	if cerr != nil {
		return cfg, fmt.Errorf("cannot trust the edge API: pass --api-fingerprint (`tuna-edge api-fingerprint` prints it) "+
			"or --api-ca-file, or --data-dir of the edge on this host: %w", cerr)
	}
	cfg.APIFingerprint = apiwire.Fingerprint(cert.Raw)
	return cfg, nil
}

func (f *apiFlags) json(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
