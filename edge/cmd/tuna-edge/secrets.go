package main

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

func newSecrets() *cobra.Command {
	f := &apiFlags{}
	cmd := &cobra.Command{
		Use:   "secrets",
		Short: "Manage the edge's secrets through its API (the edge must run)",
		Long: "Set, read, list and delete the secrets a running edge keeps. The commands call the control API " +
			"with an API key holding secrets:read and/or secrets:write (or full). " + apiFlagsHelp,
		PersistentPreRunE: f.preRun,
	}
	f.register(cmd)
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
			in := apiwire.PutSecret{Data: data}
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
