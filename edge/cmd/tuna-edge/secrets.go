package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/edge/server"
)

// apiFlags reach a running edge's API. The secrets commands cannot open
// the database: the running edge holds its lock, and only it has the key.
type apiFlags struct {
	url, key, fingerprint, caFile, dataDir, output string
}

func (f *apiFlags) client() (*client.Client, error) {
	key := f.key
	if key == "" {
		key = os.Getenv("TUNA_API_KEY")
	}
	if key == "" {
		return nil, fmt.Errorf("no API key: pass --api-key, or set TUNA_EDGE_API_KEY or TUNA_API_KEY")
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
		fp, err := client.ParseFingerprint(f.fingerprint)
		if err != nil {
			return nil, fmt.Errorf("--api-fingerprint: %w", err)
		}
		trust.Fingerprint = fp
	}
	if trust.IsZero() && strings.HasPrefix(strings.ToLower(f.url), "https://") {
		// On the edge's host, the generated certificate is the pin.
		cert, err := server.ReadAPICertificate(f.dataDir, "")
		if err != nil {
			return nil, fmt.Errorf("cannot trust the edge API: pass --api-fingerprint (`tuna-edge api-fingerprint` prints it) "+
				"or --api-ca-file, or --data-dir of an edge with a generated certificate: %w", err)
		}
		trust.Fingerprint = client.Fingerprint(cert.Raw)
	}
	return client.New(f.url, key, client.WithTrust(trust)), nil
}

func (f *apiFlags) json(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newSecrets() *cobra.Command {
	f := &apiFlags{}
	cmd := &cobra.Command{
		Use:   "secrets",
		Short: "Manage the edge's secrets through its API (the edge must run)",
		Long: "Set, read, list and delete the secrets a running edge keeps. The commands call the control API " +
			"with an API key holding secrets:read and/or secrets:write (or full). On the edge's host, the API's " +
			"generated certificate in --data-dir is pinned; elsewhere pass --api-fingerprint or --api-ca-file.",
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags()); err != nil {
				return err
			}
			if f.output != "text" && f.output != "json" {
				return fmt.Errorf("-o %q: want text or json", f.output)
			}
			return nil
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.url, "api-url", "https://127.0.0.1:8443", "the edge's control API")
	pf.StringVar(&f.key, "api-key", "", "API key (default $TUNA_EDGE_API_KEY, then $TUNA_API_KEY)")
	pf.StringVar(&f.fingerprint, "api-fingerprint", "", "pin the API's certificate (sha256:HEX, as tuna-edge api-fingerprint prints it)")
	pf.StringVar(&f.caFile, "api-ca-file", "", "PEM bundle the API's certificate must chain to")
	pf.StringVar(&f.dataDir, "data-dir", "/var/lib/tuna-edge", "the edge's data directory, to pin its generated API certificate when no pin is given")
	pf.StringVarP(&f.output, "output", "o", "text", "text or json")
	cmd.AddCommand(secretsSet(f), secretsGet(f), secretsList(f), secretsDelete(f))
	return cmd
}

func secretsSet(f *apiFlags) *cobra.Command {
	var fromFile []string
	var expected int64
	cmd := &cobra.Command{
		Use:   "set NAME KEY=VALUE... [--from-file KEY=PATH]...",
		Short: "Create a secret or replace all of its data",
		Example: "  tuna-edge secrets set team-a/db user=app --from-file password=./db-password\n" +
			"  tuna-edge secrets set team-a/db user=app --expected-version 0   # only if it does not exist",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data := map[string][]byte{}
			add := func(kind, arg string, value func(string) ([]byte, error)) error {
				k, v, ok := strings.Cut(arg, "=")
				if !ok || k == "" {
					// Name only the key: the rest may be a value.
					return fmt.Errorf("%s %q...: want KEY=VALUE or, with --from-file, KEY=PATH", kind, k)
				}
				if _, dup := data[k]; dup {
					return fmt.Errorf("key %q is given twice", k)
				}
				b, err := value(v)
				if err != nil {
					return err
				}
				data[k] = b
				return nil
			}
			for _, a := range args[1:] {
				if err := add("argument", a, func(v string) ([]byte, error) { return []byte(v), nil }); err != nil {
					return err
				}
			}
			for _, a := range fromFile {
				if err := add("--from-file", a, func(p string) ([]byte, error) {
					b, err := os.ReadFile(p)
					if err != nil {
						return nil, fmt.Errorf("--from-file: %w", err)
					}
					return b, nil
				}); err != nil {
					return err
				}
			}
			in := client.PutSecret{Data: data}
			if cmd.Flags().Changed("expected-version") {
				in.ExpectedVersion = &expected
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			info, err := c.PutSecret(cmd.Context(), args[0], in)
			if err != nil {
				return err
			}
			if f.output == "json" {
				return f.json(cmd.OutOrStdout(), info)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "secret %s at version %d, keys %s\n", info.Name, info.Version, strings.Join(info.Keys, ","))
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&fromFile, "from-file", nil, "KEY=PATH: a value read from a file (repeat for more)")
	cmd.Flags().Int64Var(&expected, "expected-version", 0, "write only if the secret is at this version (0: only if it does not exist)")
	return cmd
}

func secretsGet(f *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "get NAME",
		Short: "Print a secret's values (text: KEY=VALUE lines; json: as the API returns it, values base64)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			s, err := c.GetSecret(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: printing the values of secret %s (version %d)\n", s.Name, s.Version)
			if f.output == "json" {
				return f.json(cmd.OutOrStdout(), s)
			}
			w := cmd.OutOrStdout()
			for _, k := range slices.Sorted(maps.Keys(s.Data)) {
				fmt.Fprintf(w, "%s=%s\n", k, s.Data[k])
			}
			return nil
		},
	}
}

func secretsList(f *apiFlags) *cobra.Command {
	var prefix string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List secrets (names, versions and key names; never values)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			l, err := c.ListSecrets(cmd.Context(), prefix)
			if err != nil {
				return err
			}
			if f.output == "json" {
				return f.json(cmd.OutOrStdout(), l)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tVERSION\tKEYS\tUPDATED")
			for _, it := range l.Items {
				fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", it.Name, it.Version, strings.Join(it.Keys, ","), it.UpdatedAt.Format(time.RFC3339))
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "only names starting with this")
	return cmd
}

func secretsDelete(f *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a secret",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			if err := c.DeleteSecret(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "deleted secret %s\n", args[0])
			return nil
		},
	}
}
