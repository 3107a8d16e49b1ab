// Command tuna-edge is the self-hosted public side of Tuna tunnels: control
// API, SSH tunnel transport and public HTTP(S)/TCP listeners in one binary.
// The logic lives in edge/server; this file only parses flags.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"code.tuna.am/tuna/k8s-operator/internal/version"
)

// envPrefix: every flag --foo-bar may also be set as TUNA_EDGE_FOO_BAR.
const envPrefix = "TUNA_EDGE_"

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "tuna-edge:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "tuna-edge",
		Short:         "Self-hosted tunnel edge for the Tuna Kubernetes operator",
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version, as `version` prints it (see internal/version).
		Version: version.Get().String(),
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return applyEnv(cmd.Flags())
		},
	}
	root.SetVersionTemplate("tuna-edge {{.Version}}\n")
	root.AddCommand(newServe(), newKeys(), newOwners(), newAPIFingerprint(), newSecrets(), newMigrate(), newClusterKeys(), newVersion())
	return root
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and build date",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "tuna-edge", version.Get())
		},
	}
}

// EnvName is the environment variable of a flag.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applyEnv fills every flag not given on the command line from its
// environment variable; the command line wins.
func applyEnv(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		v, ok := os.LookupEnv(envName(f.Name))
		if !ok {
			return
		}
		if sv, isSlice := f.Value.(pflag.SliceValue); isSlice {
			err = sv.Replace(strings.Split(v, ","))
		} else {
			err = f.Value.Set(v)
		}
		if err != nil {
			err = fmt.Errorf("%s=%q: %w", envName(f.Name), v, err)
		}
	})
	return err
}
