package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// newOwners is the edge administrator's hand-over of addresses between
// owners, through the API with a full key.
func newOwners() *cobra.Command {
	f := &apiFlags{}
	cmd := &cobra.Command{
		Use:   "owners",
		Short: "Hand reservations between owners through the edge's API (a full key)",
		Long: "Every reservation and address claim belongs to an owner, \"<cluster-id>/<namespace>\" for the operator. " +
			"When a cluster is lost and rebuilt with another cluster id, its addresses still belong to the old id: " +
			"`owners transfer` hands them to the new one. " + apiFlagsHelp,
		PersistentPreRunE: f.preRun,
	}
	f.register(cmd)
	var from, to string
	transfer := &cobra.Command{
		Use:   "transfer --from OLD --to NEW",
		Short: "Hand every reservation and claim of the owners under OLD to the same owners under NEW",
		Long: "Owners OLD and OLD/<namespace> become NEW and NEW/<namespace>, in the owner and in shared_with of every " +
			"domain and TCP endpoint, and in the claims of bare subdomains. Tunnel keys keep their owner: the old " +
			"cluster's keys lose the addresses, and their live tunnels on them end. The edge logs the transfer as an " +
			"audit line. Running it again finishes a transfer that was cut short.",
		Example: "  tuna-edge owners transfer --from 1f0c7c4e-5d1b-4c69-9b6e-0a3f2d9e8b11 --to prod-eu-1 --api-key-file /var/lib/tuna-edge/bootstrap-key",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			res, err := c.TransferOwners(cmd.Context(), from, to)
			if err != nil {
				return err
			}
			if f.output == "json" {
				return f.json(cmd.OutOrStdout(), res)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "owners under %s now under %s\n", res.From, res.To)
			for _, part := range []struct {
				what  string
				names []string
			}{{"domains", res.Domains}, {"TCP endpoints", res.TCPEndpoints}, {"claimed subdomains", res.Claims}} {
				fmt.Fprintf(w, "%s (%d): %s\n", part.what, len(part.names), strings.Join(part.names, ", "))
			}
			return nil
		},
	}
	transfer.Flags().StringVar(&from, "from", "", "the owner prefix whose addresses move: the lost cluster's id")
	transfer.Flags().StringVar(&to, "to", "", "the owner prefix they move to: the new cluster's id (the chart's clusterID)")
	_ = transfer.MarkFlagRequired("from")
	_ = transfer.MarkFlagRequired("to")
	cmd.AddCommand(transfer)
	return cmd
}
