package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"code.tuna.am/tuna/k8s-operator/cli/pkg/cluster"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/preflight"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/release"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/values"
)

// releaseFlags are the flags of plan, install and upgrade.
type releaseFlags struct {
	vf             values.Flags
	out            output
	reuseValues    bool
	resetValues    bool
	createNS       bool
	forceConflicts bool
	wait           bool
	timeout        time.Duration
}

func (a *app) options(f *releaseFlags) (release.Options, error) {
	if err := f.out.check(); err != nil {
		return release.Options{}, err
	}
	if f.reuseValues && f.resetValues {
		return release.Options{}, &exitError{code: ExitInvalid, err: fmt.Errorf("--reuse-values and --reset-values exclude each other"), hint: "pass one of them"}
	}
	vals, err := f.vf.Load()
	if err != nil {
		return release.Options{}, err
	}
	return release.Options{
		Release: a.release, Namespace: a.namespace, Values: vals,
		ReuseValues: f.reuseValues, ResetValues: f.resetValues,
		CRDs:            a.env.CRDs,
		CreateNamespace: f.createNS, ForceConflicts: f.forceConflicts,
		Wait: f.wait, Timeout: f.timeout,
		Progress: a.progress(), Debug: a.debug,
	}, nil
}

func (a *app) planCmd() *cobra.Command {
	var f releaseFlags
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Show what an install or upgrade would change (server-side dry run)",
		Long: `Show, per object, what ` + "`install`" + ` (when the release does not exist) or
` + "`upgrade`" + ` (when it does) with the same values would change: create, update or
delete. Every object is applied with server-side apply in dry-run mode as
field manager helm, exactly as Helm applies it, and the result is compared
with the live object; objects of the current release that the new values
no longer render are deleted. CRD changes are summarised (new version,
schema changed, ...): they are applied before the release.

Exit codes: 0 nothing would change; 2 something would change; 1 the plan
could not be made or the install/upgrade would fail (marked !); 3 invalid
values or flags.`,
		Example: `  tuna-operator plan -f values.yaml
  tuna-operator plan --reuse-values --set agentManager.allowExternalUpstreams=true -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := a.options(&f)
			if err != nil {
				return err
			}
			c, err := a.connectAndPing(cmd.Context())
			if err != nil {
				return err
			}
			p, err := (&release.Manager{C: c}).Plan(cmd.Context(), o)
			if err != nil {
				return err
			}
			if f.out.json() {
				err = writeJSON(a.env.Stdout, struct {
					*release.Plan
					Changes bool `json:"changes"`
				}{p, p.HasChanges()})
			} else {
				printPlan(a.env.Stdout, p)
			}
			switch {
			case err != nil:
				return err
			case p.HasErrors():
				return &exitError{code: ExitFailed, err: fmt.Errorf("the %s would fail: see the objects marked ! in the plan", p.Operation)}
			case p.HasChanges():
				return exitCode(ExitChanges)
			}
			return nil
		},
	}
	a.releaseFlag(cmd)
	f.vf.AddFlags(cmd.Flags())
	a.outputFlag(cmd, &f.out, "text", "text", "json")
	cmd.Flags().BoolVar(&f.reuseValues, "reuse-values", false, "upgrade: merge the given values over the release's current ones")
	cmd.Flags().BoolVar(&f.resetValues, "reset-values", false, "upgrade: use only the given values (without it, an upgrade without values keeps the current ones, as Helm does)")
	return cmd
}

func printPlan(w io.Writer, p *release.Plan) {
	if p.Operation == "install" {
		fmt.Fprintf(w, "Plan: install release %s in namespace %s\n", p.Release, p.Namespace)
	} else {
		fmt.Fprintf(w, "Plan: upgrade release %s in namespace %s (revision %d → %d)\n", p.Release, p.Namespace, p.Revision, p.Revision+1)
	}
	section := func(title string, cs []cluster.Change) {
		var lines []string
		// A note many objects share (e.g. a namespace still to be
		// created) is printed once, after the section.
		noteCount := map[string]int{}
		for _, c := range cs {
			if c.Note != "" && (c.Action != cluster.ActionUnchanged || c.Error != "") {
				noteCount[c.Note]++
			}
		}
		var shared []string
		for _, c := range cs {
			if c.Action == cluster.ActionUnchanged && c.Error == "" {
				continue
			}
			mark := map[string]string{cluster.ActionCreate: "+", cluster.ActionUpdate: "~", cluster.ActionDelete: "-"}[c.Action]
			if c.Error != "" {
				mark = "!"
			}
			line := fmt.Sprintf("  %s %-6s %s", mark, c.Action, c.Ref())
			if len(c.Summary) > 0 {
				line += ": " + strings.Join(c.Summary, "; ")
			}
			lines = append(lines, line)
			if c.Kind != "CustomResourceDefinition" {
				for _, fld := range c.Fields {
					lines = append(lines, "           "+fld)
				}
			}
			switch {
			case c.Note != "" && noteCount[c.Note] > 1:
				if !slices.Contains(shared, c.Note) {
					shared = append(shared, c.Note)
				}
			case c.Note != "":
				lines = append(lines, "           note: "+c.Note)
			}
			if c.Error != "" {
				lines = append(lines, "           error: "+c.Error)
			}
		}
		if len(lines) > 0 {
			fmt.Fprintln(w)
			fmt.Fprintln(w, title)
			for _, l := range lines {
				fmt.Fprintln(w, l)
			}
			for _, n := range shared {
				fmt.Fprintf(w, "  note (%d objects): %s\n", noteCount[n], n)
			}
		}
	}
	section("CRDs (applied first, server-side apply as field manager helm):", p.CRDs)
	section("Release objects:", p.Resources)
	fmt.Fprintln(w)
	n := p.Counts()
	if !p.HasChanges() {
		fmt.Fprintf(w, "No changes: the cluster matches the chart and the values (%d objects unchanged).\n", n[cluster.ActionUnchanged])
		return
	}
	fmt.Fprintf(w, "%d to create, %d to update, %d to delete, %d unchanged.\n",
		n[cluster.ActionCreate], n[cluster.ActionUpdate], n[cluster.ActionDelete], n[cluster.ActionUnchanged])
}

func (a *app) installCmd() *cobra.Command {
	var f releaseFlags
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Apply the CRDs, then install the release",
		Long: `Install the operator: first the chart's CRDs, applied with server-side apply
as field manager helm, then the release with the Helm 4 SDK (server-side
apply; the release is stored in Secrets of the namespace). With --wait, wait
for the Deployments to be ready and show progress.

Exit codes: 0 installed; 3 invalid values, or the release exists (use
upgrade); 1 the install failed or --wait timed out.`,
		Example: `  tuna-operator install --set edge.apiURL=https://edge.example.com:8443 --set credentials.existingSecret=tuna-api-key
  tuna-operator install -f values.yaml --wait --timeout 5m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runRelease(cmd.Context(), &f, "installed", func(ctx context.Context, m *release.Manager, o release.Options) (*release.Info, error) {
				return m.Install(ctx, o)
			})
		},
	}
	a.installFlags(cmd, &f)
	return cmd
}

// runRelease is what install and upgrade share: read the values, reach the
// cluster, warn about credentials, run the Helm action, report the result.
func (a *app) runRelease(ctx context.Context, f *releaseFlags, verb string,
	act func(context.Context, *release.Manager, release.Options) (*release.Info, error)) error {
	o, err := a.options(f)
	if err != nil {
		return err
	}
	c, err := a.connectAndPing(ctx)
	if err != nil {
		return err
	}
	a.warnCredentials(ctx, c, o)
	info, err := act(ctx, &release.Manager{C: c}, o)
	return a.printInfo(info, err, verb, f.out)
}

func (a *app) installFlags(cmd *cobra.Command, f *releaseFlags) {
	a.releaseFlag(cmd)
	f.vf.AddFlags(cmd.Flags())
	a.outputFlag(cmd, &f.out, "text", "text", "json")
	cmd.Flags().BoolVar(&f.createNS, "create-namespace", true, "create the release namespace when it does not exist")
	cmd.Flags().BoolVar(&f.forceConflicts, "force-conflicts", false, "take over fields that other field managers own (server-side apply)")
	cmd.Flags().BoolVar(&f.wait, "wait", false, "wait until the Deployments are ready, showing progress")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 5*time.Minute, "how long --wait waits")
}

func (a *app) upgradeCmd() *cobra.Command {
	var (
		f       releaseFlags
		install bool
	)
	cmd := &cobra.Command{
		Use:   "upgrade",
		Short: "Apply the CRDs, then upgrade the release",
		Long: `Upgrade the operator: first the chart's CRDs, applied with server-side apply
as field manager helm (Helm never upgrades crds/, R27), then the release with
the Helm 4 SDK. Values: as helm upgrade, an upgrade without values keeps the
current ones; --reuse-values merges the given ones over them; --reset-values
uses only the given ones. ` + "`tuna-operator plan`" + ` shows the changes first.

Exit codes: 0 upgraded; 3 invalid values, or no such release (use install
or --install); 1 the upgrade failed or --wait timed out.`,
		Example: `  tuna-operator plan --reuse-values && tuna-operator upgrade --reuse-values
  tuna-operator upgrade --install -f values.yaml --wait`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runRelease(cmd.Context(), &f, "upgraded", func(ctx context.Context, m *release.Manager, o release.Options) (*release.Info, error) {
				return m.Upgrade(ctx, o, install)
			})
		},
	}
	a.installFlags(cmd, &f)
	cmd.Flags().BoolVar(&install, "install", false, "install the release when it does not exist")
	cmd.Flags().BoolVar(&f.reuseValues, "reuse-values", false, "merge the given values over the release's current ones")
	cmd.Flags().BoolVar(&f.resetValues, "reset-values", false, "use only the given values")
	return cmd
}

// warnCredentials warns (stderr) when the Secret the controller will read
// is missing: the install goes on, since it may be created afterwards.
func (a *app) warnCredentials(ctx context.Context, c *cluster.Cluster, o release.Options) {
	vals := o.Values
	if len(vals) == 0 {
		return // an upgrade keeping its values: checked when they were set
	}
	r, err := values.Render(vals, chartOptions(o))
	if err != nil {
		return // reported by the install itself
	}
	creds, err := values.CredentialsOf(r)
	if err != nil || creds.SecretName == "" || creds.Source == values.SourceAPIKey {
		return
	}
	if _, err := preflight.SecretKey(ctx, c, o.Namespace, creds.SecretName, creds.SecretKey); err != nil {
		fmt.Fprintf(a.env.Stderr, "Warning: %v: the controller will not start until it does\n", err)
		if ce := (*preflight.CheckError)(nil); errors.As(err, &ce) && ce.Hint != "" {
			fmt.Fprintln(a.env.Stderr, "Hint: "+ce.Hint)
		}
	}
}

func (a *app) printInfo(info *release.Info, err error, verb string, out output) error {
	if info != nil {
		if out.json() {
			if werr := writeJSON(a.env.Stdout, info); werr != nil {
				return werr
			}
		} else {
			fmt.Fprintf(a.env.Stdout, "Release %s %s in namespace %s: revision %d, %s (chart %s, app %s)\n",
				info.Release, verb, info.Namespace, info.Revision, info.Status, info.ChartVersion, info.AppVersion)
			for _, c := range info.CRDs {
				fmt.Fprintf(a.env.Stdout, "CRD %s %s\n", c.Name, c.Result)
			}
			if info.Notes != "" {
				fmt.Fprintf(a.env.Stdout, "\nNOTES:\n%s\n", strings.TrimRight(info.Notes, "\n"))
			}
		}
	}
	return err
}

func (a *app) uninstallCmd() *cobra.Command {
	var (
		out            output
		timeout        time.Duration
		deleteCRDs     bool
		ignoreNotFound bool
	)
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Delete the operator's resources, then the release (and the CRDs with --delete-crds)",
		Long: `Uninstall in the documented order (R28):

  1. delete every Tunnel and SecretSync, then every Domain and TCPEndpoint,
     in all namespaces, and wait (showing progress) until the operator's
     finalizers have revoked their keys, released their reservations on the
     edge and applied each SecretSync's deletionPolicy to its Secret;
  2. uninstall the release (the operator stops);
  3. with --delete-crds only, delete the CRDs tunnels.k8s.tuna.am,
     domains.k8s.tuna.am, tcpendpoints.k8s.tuna.am and
     secretsyncs.k8s.tuna.am.

When resources are still there after --timeout, the release stays, so that
the operator can finish: the error names them and says how to go on.

Exit codes: 0 uninstalled; 3 no such release (see --ignore-not-found);
1 resources still waiting for finalizers after --timeout, or a failure.`,
		Example: `  tuna-operator uninstall
  tuna-operator uninstall --timeout 10m --delete-crds`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			c, err := a.connectAndPing(cmd.Context())
			if err != nil {
				return err
			}
			res, err := (&release.Manager{C: c}).Uninstall(cmd.Context(), release.UninstallOptions{
				Release: a.release, Namespace: a.namespace, Timeout: timeout,
				DeleteCRDs: deleteCRDs, IgnoreNotFound: ignoreNotFound,
				Progress: a.progress(), Debug: a.debug,
			})
			if res != nil && (err == nil || out.json()) {
				if out.json() {
					if werr := writeJSON(a.env.Stdout, res); werr != nil {
						return werr
					}
				} else {
					fmt.Fprintf(a.env.Stdout, "Deleted %d Tunnels, SecretSyncs, Domains, TCPEndpoints and AccessPolicies\n", res.ResourcesDeleted)
					if res.ReleaseRemoved {
						fmt.Fprintf(a.env.Stdout, "Release %s uninstalled from namespace %s\n", res.Release, res.Namespace)
					}
					if res.CRDsDeleted {
						fmt.Fprintln(a.env.Stdout, "CRDs deleted")
					} else {
						fmt.Fprintln(a.env.Stdout, "CRDs kept")
					}
				}
			}
			return err
		},
	}
	a.releaseFlag(cmd)
	a.outputFlag(cmd, &out, "text", "text", "json")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the resources' finalizers and the uninstall")
	cmd.Flags().BoolVar(&deleteCRDs, "delete-crds", false, "also delete the CRDs (after the release)")
	cmd.Flags().BoolVar(&ignoreNotFound, "ignore-not-found", false, "go on when the release does not exist")
	return cmd
}
