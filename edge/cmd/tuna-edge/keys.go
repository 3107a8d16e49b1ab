package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/api"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
)

// keyAdmin is where the keys commands manage API keys: the running edge's
// API (with a full key), or, with --offline, the stopped edge's state.
type keyAdmin interface {
	CreateAPIKey(ctx context.Context, in apiwire.CreateAPIKey) (*apiwire.APIKey, error)
	ListAPIKeys(ctx context.Context) ([]apiwire.APIKey, error)
	DeleteAPIKey(ctx context.Context, id string) error
}

// keysFlags are the keys commands' flags: those of the API, and of the
// offline mode.
type keysFlags struct {
	apiFlags
	offline bool
	etcd    store.EtcdConfig
}

// withAdmin runs fn against the API, or offline against the data dir, or
// against the cluster's etcd when --etcd-endpoints names it.
func (f *keysFlags) withAdmin(fn func(keyAdmin) error) error {
	if !f.offline && len(f.etcd.Endpoints) == 0 {
		c, err := f.client()
		if err != nil {
			return err
		}
		return fn(c)
	}
	return withStoreOf(f.dataDir, f.etcd, func(st *store.Store) error { return fn(offlineKeys{st}) })
}

func newKeys() *cobra.Command {
	f := &keysFlags{}
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Manage API keys through the edge's API (a full key), or offline",
		Long: "Create, list, revoke and rotate API keys. The commands call the running edge's API with a full key. " +
			apiFlagsHelp + " With --offline they work on a stopped edge's data directory instead (bbolt allows one " +
			"process per file), or, with --etcd-endpoints, on a cluster's state while its nodes run.",
		Example: "  tuna-edge keys create --scope tunnels:write --owner-prefix prod-eu-1 --name prod-eu-1 --api-key-file /var/lib/tuna-edge/bootstrap-key\n" +
			"  tuna-edge keys list\n" +
			"  tuna-edge keys rotate 0123456789abcdef\n" +
			"  tuna-edge keys revoke 0123456789abcdef",
		PersistentPreRunE: f.preRun,
	}
	f.register(cmd)
	pf := cmd.PersistentFlags()
	pf.BoolVar(&f.offline, "offline", false, "work on the stopped edge's --data-dir (or --etcd-endpoints), not through the API")
	etcdFlags(pf, &f.etcd)
	cmd.AddCommand(keysCreate(f), keysList(f), keysRevoke(f), keysRotate(f))
	return cmd
}

func keysCreate(f *keysFlags) *cobra.Command {
	var in apiwire.CreateAPIKey
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create an API key and print its secret (shown only once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.withAdmin(func(a keyAdmin) error {
				k, err := a.CreateAPIKey(cmd.Context(), in)
				if err != nil {
					return err
				}
				return f.printNewKey(cmd, k, "created")
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&in.Name, "name", "", "a name to recognise the key by")
	fl.StringSliceVar(&in.Scopes, "scope", nil, "tunnels:write, tunnels:connect, secrets:read, secrets:write or full (repeat or comma-separate)")
	fl.StringVar(&in.SecretPrefix, "secret-prefix", "", "confine the key's secrets scopes to secret names starting with this, e.g. team-a/")
	fl.StringVar(&in.OwnerPrefix, "owner-prefix", "", "bind a tunnels:write key to a cluster id: it then acts only for owners <id> and <id>/... (the chart's clusterID)")
	_ = cmd.MarkFlagRequired("scope")
	return cmd
}

// printNewKey prints a new key's secret on stdout (or the whole key with
// -o json) and what it is on stderr.
func (f *keysFlags) printNewKey(cmd *cobra.Command, k *apiwire.APIKey, what string) error {
	if f.output == "json" {
		return f.json(cmd.OutOrStdout(), k)
	}
	fmt.Fprintln(cmd.OutOrStdout(), k.Key)
	bound := ""
	if k.OwnerPrefix != "" {
		bound = ", bound to owner prefix " + k.OwnerPrefix
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%s API key %s with scopes %s%s; the secret above is not stored and cannot be shown again\n",
		what, k.ID, strings.Join(k.Scopes, ","), bound)
	return nil
}

func keysList(f *keysFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List API keys (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.withAdmin(func(a keyAdmin) error {
				keys, err := a.ListAPIKeys(cmd.Context())
				if err != nil {
					return err
				}
				if f.output == "json" {
					return f.json(cmd.OutOrStdout(), apiwire.List[apiwire.APIKey]{Items: keys})
				}
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "ID\tNAME\tSCOPES\tSECRET PREFIX\tOWNER PREFIX\tCREATED")
				for _, k := range keys {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, strings.Join(k.Scopes, ","), k.SecretPrefix, k.OwnerPrefix,
						k.CreatedAt.Format(time.RFC3339))
				}
				return w.Flush()
			})
		},
	}
}

func keysRevoke(f *keysFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke an API key; through the API, the tunnels it carries end at once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.withAdmin(func(a keyAdmin) error {
				if err := a.DeleteAPIKey(cmd.Context(), args[0]); err != nil {
					return fmt.Errorf("revoking API key %s: %w", args[0], err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "revoked API key %s\n", args[0])
				return nil
			})
		},
	}
}

// keysRotate makes a key's successor: the same name, scopes and prefixes.
// The old key keeps working until it is revoked (--revoke, or keys revoke
// once every user has the new one: docs/operations.md).
func keysRotate(f *keysFlags) *cobra.Command {
	var revoke bool
	cmd := &cobra.Command{
		Use:   "rotate ID",
		Short: "Create a key with the same name, scopes and prefixes as key ID and print its secret",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.withAdmin(func(a keyAdmin) error {
				keys, err := a.ListAPIKeys(cmd.Context())
				if err != nil {
					return err
				}
				i := slices.IndexFunc(keys, func(k apiwire.APIKey) bool { return k.ID == args[0] })
				if i < 0 {
					return fmt.Errorf("no API key %s: `tuna-edge keys list` shows the ids", args[0])
				}
				old := keys[i]
				k, err := a.CreateAPIKey(cmd.Context(), apiwire.CreateAPIKey{Name: old.Name, Scopes: old.Scopes,
					SecretPrefix: old.SecretPrefix, OwnerPrefix: old.OwnerPrefix})
				if err != nil {
					return err
				}
				if err := f.printNewKey(cmd, k, "created the successor of "+old.ID+":"); err != nil {
					return err
				}
				if !revoke {
					fmt.Fprintf(cmd.ErrOrStderr(), "key %s still works: revoke it once every user has the new key (tuna-edge keys revoke %s)\n", old.ID, old.ID)
					return nil
				}
				if err := a.DeleteAPIKey(cmd.Context(), old.ID); err != nil {
					return fmt.Errorf("revoking the old key %s (the new one, %s, is made): %w", old.ID, k.ID, err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "revoked API key %s\n", old.ID)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&revoke, "revoke", false, "revoke the old key at once (its users stop working until they have the new one)")
	return cmd
}

// offlineKeys manages API keys in a stopped edge's store.
type offlineKeys struct{ st *store.Store }

func (o offlineKeys) CreateAPIKey(_ context.Context, in apiwire.CreateAPIKey) (*apiwire.APIKey, error) {
	k, err := api.CreateAPIKey(o.st, in.Name, in.Scopes, func() store.APIKey {
		return store.APIKey{CreatedAt: time.Now().UTC(), SecretPrefix: in.SecretPrefix, OwnerPrefix: in.OwnerPrefix}
	})
	return &k, err
}

func (o offlineKeys) ListAPIKeys(context.Context) ([]apiwire.APIKey, error) {
	recs, err := o.st.ListAPIKeys()
	out := make([]apiwire.APIKey, 0, len(recs))
	for _, r := range recs {
		out = append(out, apiwire.APIKey{ID: r.ID, Name: r.Name, Scopes: r.Scopes, SecretPrefix: r.SecretPrefix,
			OwnerPrefix: r.OwnerPrefix, CreatedAt: r.CreatedAt})
	}
	return out, err
}

func (o offlineKeys) DeleteAPIKey(_ context.Context, id string) error {
	if err := o.st.DeleteAPIKey(id); errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no API key %s", id)
	} else if err != nil {
		return err
	}
	return nil
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

// withStore opens the edge.db of an existing data dir: a wrong --data-dir
// is an error, never a new, empty database.
func withStore(dir string, fn func(*store.Store) error) error {
	if _, err := os.Stat(filepath.Join(dir, store.DBFile)); err != nil {
		return fmt.Errorf("--data-dir %s holds no edge state (%s): give the data dir of an edge that has run, or use the API: %w",
			dir, store.DBFile, err)
	}
	st, err := store.Open(dir)
	if err != nil {
		return fmt.Errorf("%w (is tuna-edge running on this data dir? stop it, or use the API without --offline)", err)
	}
	// The command's changes are only safe once the database is closed.
	return errors.Join(fn(st), st.Close())
}
