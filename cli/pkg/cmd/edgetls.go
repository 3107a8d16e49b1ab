package cmd

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// edgeTLSFlags say how the CLI trusts the edge API's certificate when it
// calls the edge; they override edge.apiFingerprint and edge.apiCABundle.
type edgeTLSFlags struct {
	fingerprint string
	caFile      string
}

func (f *edgeTLSFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.fingerprint, "edge-api-fingerprint", "",
		"pin of the edge API's certificate, sha256:HEX as `tuna-edge api-fingerprint` prints it (default: edge.apiFingerprint)")
	cmd.Flags().StringVar(&f.caFile, "edge-api-ca-file", "",
		"PEM file of the CAs (or the certificate) that verify the edge API (default: edge.apiCABundle)")
}

// load returns the pin and the bundle's PEM; a bundle file that cannot be
// read is a usage error.
func (f *edgeTLSFlags) load() (fingerprint, bundle string, err error) {
	if f.caFile == "" {
		return f.fingerprint, "", nil
	}
	data, err := os.ReadFile(f.caFile)
	if err != nil {
		return "", "", &exitError{code: ExitInvalid, err: fmt.Errorf("--edge-api-ca-file: %w", err),
			hint: "give a PEM file, e.g. the output of `tuna-edge api-fingerprint -o pem` on the edge"}
	}
	return f.fingerprint, string(data), nil
}
