package main

import (
	"encoding/json"
	"encoding/pem"
	"fmt"

	"github.com/spf13/cobra"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/server"
)

// newAPIFingerprint prints what clients pin. It reads only the certificate,
// never the store, so it works while the edge runs.
func newAPIFingerprint() *cobra.Command {
	var dataDir, certFile, output string
	cmd := &cobra.Command{
		Use:   "api-fingerprint",
		Short: "Print the SHA-256 fingerprint of the control API's certificate, for clients to pin",
		Long: "Print the fingerprint of the API's certificate: the generated one in --data-dir, or --api-tls-cert " +
			"when the edge serves its own. Pin it in the operator (chart value edge.apiFingerprint) and in " +
			"tuna-operator preflight (--edge-api-fingerprint). -o pem prints the certificate instead, for " +
			"edge.apiCABundle.",
		Example: "  tuna-edge api-fingerprint --data-dir /var/lib/tuna-edge\n" +
			"  tuna-edge api-fingerprint -o pem > edge-api.pem",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cert, err := server.ReadAPICertificate(dataDir, certFile)
			if err != nil {
				return err
			}
			fp := apiwire.Fingerprint(cert.Raw)
			w := cmd.OutOrStdout()
			switch output {
			case "text":
				_, err = fmt.Fprintln(w, fp)
			case "pem":
				err = pem.Encode(w, &pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
			case "json":
				err = json.NewEncoder(w).Encode(map[string]any{
					"fingerprint": fp, "subject": cert.Subject.String(), "dns_names": cert.DNSNames,
					"ip_addresses": cert.IPAddresses, "not_after": cert.NotAfter,
				})
			default:
				return fmt.Errorf("-o %q: want text, json or pem", output)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", "/var/lib/tuna-edge", "the edge's data directory")
	f.StringVar(&certFile, "api-tls-cert", "", "the certificate file the edge serves the API with, when not the generated one")
	f.StringVarP(&output, "output", "o", "text", "text, json or pem")
	return cmd
}
