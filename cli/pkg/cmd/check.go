package cmd

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"code.tuna.am/tuna/k8s-operator/chart"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/cluster"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/preflight"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/release"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/values"
)

func chartOptions(o release.Options) chart.Options {
	return chart.Options{ReleaseName: o.Release, Namespace: o.Namespace}
}

func (a *app) preflightCmd() *cobra.Command {
	var (
		vf         values.Flags
		out        output
		apiKey     string
		edgeAPIURL string
		edgeTLS    edgeTLSFlags
		timeout    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "preflight",
		Short: "Check the cluster, the values and the edge before an install or upgrade",
		Long: `Check, in the style of linkerd check --pre, that an install or upgrade with
these values can work. Each check prints ✓ (passed), ‼ (warning) or ×
(failed), with a hint of what to change:

  kubernetes-api  the API server answers and runs Kubernetes >= 1.32
  permissions     the caller may create what the install needs
                  (SelfSubjectAccessReview), and every kind is served
  crds            the CRDs are installed (‼ when missing: install applies
                  them) and current (× when they differ: run upgrade)
  ingress-class   no other IngressClass named tuna, no other default class
                  when ingressClass.default=true
  gateway-api     the Gateway API CRDs are installed (‼ when missing, × when
                  gatewayClass.enabled=true needs them), and a running
                  operator accepted the GatewayClasses of its controllerName
                  (‼ naming those it has not)
  load-balancer   LoadBalancer Services of class k8s.tuna.am/tuna are served
                  (‼ when loadBalancer.enabled=false leaves some pending);
                  with loadBalancer.classless=true, no classless one is
                  already served by another load balancer (×)
  namespaces      every namespace of watchNamespaces exists (×: the chart's
                  Roles go there)
  cluster-id      ‼ when Domains or TCPEndpoints keep reservations
                  (reclaimPolicy: Retain) while clusterID is left to the
                  UID of kube-system, which a rebuilt cluster does not share
  access-policies every Secret the AccessPolicies name exists with its key
                  (× naming those missing: their addresses refuse every
                  request), and the edge accepted each policy (‼ naming
                  those it did not)
  values          the values, the credentials source and its injection
  credentials     the Secret of existingSecret (or an extraEnv secretKeyRef)
                  exists and has the key
  edge            the edge API is reachable over TLS that the pin
                  (edge.apiFingerprint) or CA bundle (edge.apiCABundle)
                  verifies, accepts the API key with scope
                  tunnels:write (‼ when the key has full access, more than
                  it needs), enforces access policies (‼ for an edge that
                  predates them), and its SSH transport answers with the
                  host key the API publishes

The API key checked is --api-key, else $TUNA_API_KEY, else
credentials.apiKey, else the api-key of credentials.existingSecret. The edge
URL is --edge-api-url, else edge.apiURL; its certificate pin
--edge-api-fingerprint, else edge.apiFingerprint (what tuna-edge
api-fingerprint prints on the edge).

Exit codes: 0 no check failed (warnings allowed); 1 a check failed; 3 bad
flags.`,
		Example: `  tuna-operator preflight -f values.yaml
  TUNA_API_KEY=tuna_... tuna-operator preflight -f values-bank-vaults.yaml -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			vals, err := vf.Load()
			if err != nil {
				return err
			}
			from := "--api-key"
			if apiKey == "" {
				apiKey, from = a.env.Getenv("TUNA_API_KEY"), "$TUNA_API_KEY"
			}
			fp, bundle, err := edgeTLS.load()
			if err != nil {
				return err
			}
			c, cerr := a.connect()
			rep := preflight.Run(cmd.Context(), c, cerr, preflight.Options{
				Release: a.release, Namespace: a.namespace, Values: vals,
				APIKey: apiKey, APIKeyFrom: from, EdgeAPIURL: edgeAPIURL,
				EdgeAPIFingerprint: fp, EdgeAPICABundle: bundle,
				CRDs: a.env.CRDs, Timeout: timeout,
			})
			return a.writeReport(&out, rep, ExitFailed)
		},
	}
	vf.AddFlags(cmd.Flags())
	a.releaseFlag(cmd)
	a.outputFlag(cmd, &out, "text", "text", "json")
	cmd.Flags().StringVar(&apiKey, "api-key", "", "the API key to check (default: $TUNA_API_KEY, credentials.apiKey, or the existingSecret's api-key)")
	cmd.Flags().StringVar(&edgeAPIURL, "edge-api-url", "", "the edge's control API URL (default: edge.apiURL)")
	edgeTLS.add(cmd)
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "timeout of each network check")
	return cmd
}

func (a *app) statusCmd() *cobra.Command {
	var out output
	cmd := &cobra.Command{
		Use:   "status",
		Short: "List Tunnels, Domains, TCPEndpoints, SecretSyncs, AccessPolicies, LoadBalancer Services, Gateways and HTTPRoutes with their address and health",
		Long: `List the operator's resources in all namespaces (or only in -n): Tunnels
with their public URL, Domains with their FQDN, TCPEndpoints with their
address, SecretSyncs with the Secret they write, and the Ready condition
with its reason; AccessPolicies with the addresses they guard and their
Accepted condition (READY True when the edge has them in force); the LoadBalancer Services it publishes (kind Service)
with the hosts and ports of their status.loadBalancer: Ready True when
every TCP port is published, False with the first port's error; and, with
the Gateway API installed, the Gateways of its GatewayClasses (their
addresses, Ready from Programmed) and the HTTPRoutes and TCPRoutes it
reports on (their Gateways, Ready when Accepted and ResolvedRefs are True
for every one).

Exit codes: 0 listed (whatever the health); 1 the cluster could not be read;
3 bad flags.`,
		Example: `  tuna-operator status
  tuna-operator status -n apps -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			ns := ""
			if cmd.Flags().Changed("namespace") {
				ns = a.namespace
			}
			c, err := a.connectAndPing(cmd.Context())
			if err != nil {
				return err
			}
			items, installed, err := c.StatusOf(cmd.Context(), ns)
			if err != nil {
				return err
			}
			if !installed {
				return &exitError{code: ExitFailed, err: fmt.Errorf("the CRDs %s are not installed", strings.Join(cluster.CRDNames(), ", ")), hint: "install the operator: tuna-operator install"}
			}
			if out.json() {
				if items == nil {
					items = []cluster.Status{}
				}
				return writeJSON(a.env.Stdout, map[string]any{"items": items})
			}
			if len(items) == 0 {
				where := "any namespace"
				if ns != "" {
					where = "namespace " + ns
				}
				fmt.Fprintf(a.env.Stdout, "No Tunnels, Domains, TCPEndpoints, SecretSyncs, AccessPolicies, LoadBalancer Services of class tuna, Gateways or routes in %s.\n", where)
				return nil
			}
			tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KIND\tNAMESPACE\tNAME\tADDRESS\tREADY\tREASON\tAGE")
			for _, s := range items {
				ready := s.Ready
				if s.Deleting {
					ready += " (deleting)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Kind, s.Namespace, s.Name, dash(s.Address), ready, dash(s.Reason), s.Age)
			}
			return tw.Flush()
		},
	}
	a.outputFlag(cmd, &out, "text", "text", "json")
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (a *app) versionCmd() *cobra.Command {
	var out output
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of tuna-operator and of the chart it embeds",
		Long: `Print the version of tuna-operator (its release, commit and build
date, stamped by the release build) and of the embedded chart.

Exit codes: 0; 3 bad flags.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			ch, err := chart.Load()
			if err != nil {
				return err
			}
			v := a.env.Version
			if out.json() {
				return writeJSON(a.env.Stdout, map[string]string{
					"version":      v.Version,
					"commit":       v.Commit,
					"date":         v.Date,
					"goVersion":    v.GoVersion,
					"platform":     v.Platform,
					"chart":        ch.Metadata.Name,
					"chartVersion": ch.Metadata.Version,
					"appVersion":   ch.Metadata.AppVersion,
				})
			}
			fmt.Fprintf(a.env.Stdout, "tuna-operator %s\nchart %s %s (app %s)\n", v, ch.Metadata.Name, ch.Metadata.Version, ch.Metadata.AppVersion)
			return nil
		},
	}
	a.outputFlag(cmd, &out, "text", "text", "json")
	return cmd
}
