package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"code.tuna.am/tuna/k8s-operator/edge/internal/secrets"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
	"code.tuna.am/tuna/k8s-operator/edge/server"
)

// etcdFlags are the settings of the etcd a cluster keeps its state in,
// shared by serve and migrate-to-etcd.
func etcdFlags(f *pflag.FlagSet, c *store.EtcdConfig) {
	f.StringSliceVar(&c.Endpoints, "etcd-endpoints", nil, "etcd client URLs, comma-separated: keep the state in etcd, shared by every node of a cluster, instead of <data-dir>/edge.db")
	f.StringVar(&c.CAFile, "etcd-ca-file", "", "CA bundle that verifies the etcd members' certificates")
	f.StringVar(&c.CertFile, "etcd-cert-file", "", "client certificate for etcd (TLS client authentication)")
	f.StringVar(&c.KeyFile, "etcd-key-file", "", "private key of --etcd-cert-file")
	f.StringVar(&c.Prefix, "etcd-prefix", "/tuna-edge/", "prefix of the edge's keys in etcd")
	f.DurationVar(&c.OpTimeout, "etcd-timeout", 5*time.Second, "limit of one etcd request: without quorum the API answers 503 state_unavailable after it")
}

func newMigrate() *cobra.Command {
	var dataDir, output string
	var ec store.EtcdConfig
	cmd := &cobra.Command{
		Use:   "migrate-to-etcd",
		Short: "Copy the state of a bbolt data dir into etcd (the edge must be stopped)",
		Long: "Copy every record of <data-dir>/edge.db (API keys, tunnel keys, domains, TCP endpoints, claims and " +
			"secrets, still sealed) into etcd, for a cluster of edge nodes. Run it again to resume an interrupted " +
			"migration: records already there are left alone. A target that holds other records is refused. " +
			"The secrets key and the SSH host key stay files: give every node a copy.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(ec.Endpoints) == 0 {
				return errors.New("--etcd-endpoints is required")
			}
			if _, err := os.Stat(filepath.Join(dataDir, store.DBFile)); err != nil {
				return fmt.Errorf("no state to migrate in --data-dir %s: %w", dataDir, err)
			}
			return withStore(dataDir, func(src *store.Store) error {
				dst, err := store.OpenEtcd(ec)
				if err != nil {
					return err
				}
				defer func() { _ = dst.Close() }() // an etcd client: closing only ends its connections
				rep, err := src.MigrateTo(dst)
				if err != nil {
					return err
				}
				if output == "json" {
					return json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
				}
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "RECORDS\tCOPIED\tALREADY THERE")
				for _, b := range store.MigratedBuckets() {
					fmt.Fprintf(w, "%s\t%d\t%d\n", b, rep.Copied[b], rep.Present[b])
				}
				if err := w.Flush(); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "%d records in etcd under %s; start the nodes with --etcd-endpoints and the same secrets key and host key files\n",
					rep.Total(), ec.Prefix)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", "/var/lib/tuna-edge", "the edge's data directory (holding edge.db)")
	f.StringVarP(&output, "output", "o", "text", "text or json")
	etcdFlags(f, &ec)
	return cmd
}

func newClusterKeys() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "cluster-keys",
		Short: "Create the SSH host key and secrets key that every node of a cluster shares",
		Long: "Write ssh_host_ed25519_key and secrets.key (mode 0600) into --out; copy both to every node and pass them " +
			"with --host-key-file and --secrets-key-file. Existing files are never replaced.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := os.MkdirAll(out, 0o700); err != nil {
				return err
			}
			hk := filepath.Join(out, "ssh_host_ed25519_key")
			if err := server.GenerateHostKeyFile(hk); err != nil {
				return err
			}
			sk := filepath.Join(out, "secrets.key")
			if _, err := os.Stat(sk); err == nil {
				return fmt.Errorf("%s exists: a secrets key is never replaced by accident", sk)
			}
			if _, err := secrets.GenerateKeyFile(sk); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n%s\n", hk, sk)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", ".", "directory to write the keys into")
	return cmd
}
