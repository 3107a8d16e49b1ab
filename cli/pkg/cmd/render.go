package cmd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"code.tuna.am/tuna/k8s-operator/chart"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/cluster"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/preflight"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/report"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/values"
)

func (a *app) renderCmd() *cobra.Command {
	var (
		vf          values.Flags
		out         output
		includeCRDs bool
		kubeVersion string
		apiVersions []string
	)
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Print the chart's manifests for the given values (like helm template)",
		Long: `Render the embedded chart for the given values, as helm template does: the
values are checked against values.schema.json and the chart's rules, and the
manifests are printed in Helm's install order. Nothing contacts a cluster.

Exit codes: 0 rendered; 3 invalid values or flags.`,
		Example: `  tuna-operator render --set edge.apiURL=https://edge.example.com:8443 --set credentials.existingSecret=tuna-api-key
  tuna-operator render -f values.yaml --include-crds -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			vals, err := vf.Load()
			if err != nil {
				return err
			}
			r, err := values.Render(vals, chart.Options{ReleaseName: a.release, Namespace: a.namespace, KubeVersion: kubeVersion, APIVersions: apiVersions})
			if err != nil {
				return err
			}
			if out.json() {
				list := map[string]any{"apiVersion": "v1", "kind": "List"}
				var items []any
				ms := r.Manifests
				if includeCRDs {
					ms = append(append([]chart.Manifest{}, r.CRDs...), ms...)
				}
				for _, m := range ms {
					items = append(items, m.Object.Object)
				}
				list["items"] = items
				return writeJSON(a.env.Stdout, list)
			}
			_, err = fmt.Fprint(a.env.Stdout, r.YAML(includeCRDs))
			return err
		},
	}
	vf.AddFlags(cmd.Flags())
	a.releaseFlag(cmd)
	a.outputFlag(cmd, &out, "yaml", "yaml", "json")
	cmd.Flags().BoolVar(&includeCRDs, "include-crds", false, "print the CRDs of crds/ first")
	cmd.Flags().StringVar(&kubeVersion, "kube-version", chart.DefaultKubeVersion, "Kubernetes version to render for (the chart needs >= 1.32)")
	cmd.Flags().StringSliceVar(&apiVersions, "api-versions", nil, "extra API versions the cluster serves, e.g. monitoring.coreos.com/v1")
	return cmd
}

func (a *app) validateCmd() *cobra.Command {
	var (
		vf          values.Flags
		out         output
		withCluster bool
	)
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Check values against the schema and the chart's rules (and the cluster)",
		Long: `Validate the values: values.schema.json (types, unknown keys), the chart's
rules (edge.apiURL set; exactly one credentials source of credentials.apiKey,
credentials.existingSecret or extraEnv with TUNA_API_KEY; extraEnv does not
repeat a variable the chart sets), and the semantics of the credentials: the
API key's shape, how extraEnv injects TUNA_API_KEY, the edge URL.

With --cluster (implied by --kubeconfig), also check in the release namespace
that the Secret the controller reads (credentials.existingSecret, or an
extraEnv secretKeyRef) exists and has the key.

Exit codes: 0 valid (warnings allowed); 3 a check failed; 1 the cluster could
not be reached.`,
		Example: `  tuna-operator validate -f values.yaml
  tuna-operator validate -f values.yaml --cluster -n tuna-system -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			vals, err := vf.Load()
			if err != nil {
				return err
			}
			withCluster = withCluster || cmd.Flags().Changed("kubeconfig")
			kubeVersion := ""
			var rep report.Report
			var cl *cluster.Cluster
			if withCluster {
				if cl, err = a.connectAndPing(cmd.Context()); err != nil {
					return err
				}
				if kubeVersion, err = cl.KubeVersion(cmd.Context()); err != nil {
					return err
				}
			}
			r, err := values.Render(vals, chart.Options{ReleaseName: a.release, Namespace: a.namespace, KubeVersion: kubeVersion})
			if err != nil {
				var ie *values.InvalidError
				if !errors.As(err, &ie) {
					return err
				}
				for _, p := range ie.Problems {
					rep.Fail(values.Category, "values match values.schema.json and the chart's rules", p, ie.Hint)
				}
			} else {
				creds, ok := values.Check(r, &rep)
				if ok && cl != nil && creds.SecretName != "" && creds.Source != values.SourceAPIKey {
					desc := fmt.Sprintf("Secret %s/%s has the key %s", a.namespace, creds.SecretName, creds.SecretKey)
					if _, err := preflight.SecretKey(cmd.Context(), cl, a.namespace, creds.SecretName, creds.SecretKey); err != nil {
						var ce *preflight.CheckError
						if !errors.As(err, &ce) {
							return err
						}
						rep.Fail(preflight.CatCredentials, desc, ce.Msg, ce.Hint)
					} else {
						rep.OK(preflight.CatCredentials, desc, "")
					}
				}
			}
			return a.writeReport(&out, &rep, ExitInvalid)
		},
	}
	vf.AddFlags(cmd.Flags())
	a.releaseFlag(cmd)
	a.outputFlag(cmd, &out, "text", "text", "json")
	cmd.Flags().BoolVar(&withCluster, "cluster", false, "also check the cluster (the Secret of existingSecret or extraEnv secretKeyRef)")
	return cmd
}
