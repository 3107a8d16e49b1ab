package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"code.tuna.am/tuna/k8s-operator/edge/api"
	"code.tuna.am/tuna/k8s-operator/edge/store"
)

// The keys commands work offline on the data directory. bbolt allows one
// process at a time, so they fail (after a few seconds) while the edge runs;
// use the API (POST /v1/api-keys with a full key) then. With
// --etcd-endpoints they work on a cluster's state, while its nodes run: a
// key revoked so ends its sessions on every node.
func newKeys() *cobra.Command {
	var dataDir, output string
	var ec store.EtcdConfig
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Manage API keys offline (the edge must be stopped)",
	}
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", "/var/lib/tuna-edge", "the edge's data directory")
	cmd.PersistentFlags().StringVarP(&output, "output", "o", "text", "text or json")
	etcdFlags(cmd.PersistentFlags(), &ec)

	var name, secretPrefix, ownerPrefix string
	var scopes []string
	create := &cobra.Command{
		Use:   "create",
		Short: "Create an API key and print its secret (shown only once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStoreOf(dataDir, ec, func(st *store.Store) error {
				k, err := api.CreateAPIKey(st, name, scopes, func() store.APIKey {
					return store.APIKey{CreatedAt: time.Now().UTC(), SecretPrefix: secretPrefix, OwnerPrefix: ownerPrefix}
				})
				if err != nil {
					return err
				}
				if output == "json" {
					return json.NewEncoder(cmd.OutOrStdout()).Encode(k)
				}
				fmt.Fprintln(cmd.OutOrStdout(), k.Key)
				fmt.Fprintf(cmd.ErrOrStderr(), "created API key %s with scopes %s; the secret above is not stored and cannot be shown again\n",
					k.ID, strings.Join(k.Scopes, ","))
				return nil
			})
		},
	}
	create.Flags().StringVar(&name, "name", "", "a name to recognise the key by")
	create.Flags().StringSliceVar(&scopes, "scope", nil, "tunnels:write, tunnels:connect, secrets:read, secrets:write or full (repeat or comma-separate)")
	create.Flags().StringVar(&secretPrefix, "secret-prefix", "", "confine the key's secrets scopes to secret names starting with this, e.g. team-a/")
	create.Flags().StringVar(&ownerPrefix, "owner-prefix", "", "bind a tunnels:write key to a cluster id: it then acts only for owners <id> and <id>/... (the chart's clusterID)")
	_ = create.MarkFlagRequired("scope")

	list := &cobra.Command{
		Use:   "list",
		Short: "List API keys (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStoreOf(dataDir, ec, func(st *store.Store) error {
				recs, err := st.ListAPIKeys()
				if err != nil {
					return err
				}
				if output == "json" {
					type item struct {
						ID           string    `json:"id"`
						Name         string    `json:"name,omitempty"`
						Scopes       []string  `json:"scopes"`
						SecretPrefix string    `json:"secret_prefix,omitempty"`
						CreatedAt    time.Time `json:"created_at"`
					}
					items := make([]item, 0, len(recs))
					for _, r := range recs {
						items = append(items, item{r.ID, r.Name, r.Scopes, r.SecretPrefix, r.CreatedAt})
					}
					return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"items": items})
				}
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "ID\tNAME\tSCOPES\tSECRET PREFIX\tCREATED")
				for _, r := range recs {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Name, strings.Join(r.Scopes, ","), r.SecretPrefix, r.CreatedAt.Format(time.RFC3339))
				}
				return w.Flush()
			})
		},
	}

	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke an API key",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStoreOf(dataDir, ec, func(st *store.Store) error {
				if err := st.DeleteAPIKey(args[0]); err != nil {
					return fmt.Errorf("revoking API key %s: %w", args[0], err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "revoked API key %s\n", args[0])
				return nil
			})
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

// withStoreOf opens the cluster's store when ec names etcd, else the data
// dir's.
func withStoreOf(dir string, ec store.EtcdConfig, fn func(*store.Store) error) error {
	if len(ec.Endpoints) == 0 {
		return withStore(dir, fn)
	}
	st, err := store.OpenEtcd(ec)
	if err != nil {
		return err
	}
	return errors.Join(fn(st), st.Close())
}

func withStore(dir string, fn func(*store.Store) error) error {
	if _, err := os.Stat(dir); err != nil && !os.IsNotExist(err) {
		return err
	}
	st, err := store.Open(dir)
	if err != nil {
		return fmt.Errorf("%w (is tuna-edge running on this data dir? stop it, or use the API)", err)
	}
	// The command's changes are only safe once the database is closed.
	return errors.Join(fn(st), st.Close())
}
