package cmd

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"code.tuna.am/tuna/k8s-operator/cli/pkg/cluster"
)

func (a *app) accessCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "access",
		Short: "Work with AccessPolicies: make shareable links",
	}
	cmd.AddCommand(a.linkCmd())
	return cmd
}

func (a *app) linkCmd() *cobra.Command {
	req := cluster.LinkRequest{}
	cmd := &cobra.Command{
		Use:   "link [NAMESPACE/]POLICY",
		Short: "Make a shareable link of an AccessPolicy's links rule",
		Long: `Make a signed link that opens the paths under --path of a host an
AccessPolicy guards with a links rule, until --expires, at most --uses
times (0: no limit). The link is signed with the key of the rule's Secret,
read with your credentials: whoever may read that Secret may make links.
The edge checks the signature, the host, the expiry and the uses, and
gives whoever follows the link a session for the path.

POLICY is in the namespace given by -n, or NAMESPACE/POLICY. Without
--host, the policy must guard exactly one host (status.addresses).

Exit codes: 0 printed; 1 the cluster could not be read; 3 bad arguments or
a policy without a links rule.`,
		Example: `  tuna-operator access link reports/shared-report --path /reports/q3/ --expires 72h --uses 5
  tuna-operator access link shared-report -n reports --host reports.example.com`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Namespace, req.Policy = a.namespace, args[0]
			if ns, name, ok := strings.Cut(args[0], "/"); ok {
				req.Namespace, req.Policy = ns, name
			}
			req.Now = time.Now()
			c, err := a.connectAndPing(cmd.Context())
			if err != nil {
				return err
			}
			url, l, err := c.MakeLink(cmd.Context(), req)
			if cluster.IsLinkError(err) {
				return &exitError{code: ExitInvalid, err: err}
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(a.env.Stdout, url)
			uses := "any number of times"
			if l.Uses > 0 {
				uses = fmt.Sprintf("%d times", l.Uses)
			}
			fmt.Fprintf(a.env.Stderr, "link %s opens %s%s until %s, %s\n", l.ID, l.Host, l.Path, l.Expires.Format(time.RFC3339), uses)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Host, "host", "", "host the link opens (default: the policy's one host)")
	f.StringVar(&req.Path, "path", "/", "path the link opens, and everything under it")
	f.DurationVar(&req.Expires, "expires", 24*time.Hour, "how long the link works")
	f.IntVar(&req.Uses, "uses", 0, "how many times the link may be opened (0: no limit)")
	f.StringVar(&req.Scheme, "scheme", "https", "scheme of the URL: https, or http for an edge without TLS")
	return cmd
}
