// Package cmd is the command line of tuna-operator, the companion CLI of
// the Tuna Kubernetes operator: it renders, validates, plans, installs,
// upgrades and uninstalls the embedded chart tuna-k8s-operator with the
// Helm 4 SDK, checks a cluster and an edge before an install (preflight),
// and shows the operator's resources (status).
//
// Results go to stdout, progress and errors to stderr. Run is the whole
// program; cli/cmd/tuna-operator only calls it.
package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"code.tuna.am/tuna/k8s-operator/chart"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/cluster"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/release"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/report"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/values"
	"code.tuna.am/tuna/k8s-operator/internal/version"
)

// Exit codes of tuna-operator (docs/cli.md).
const (
	// ExitOK: done; plan: nothing would change; preflight/validate: no check failed.
	ExitOK = 0
	// ExitFailed: the operation failed (cluster or edge unreachable,
	// apply refused, timeout), or a preflight check failed.
	ExitFailed = 1
	// ExitChanges: plan: the install or upgrade would change something.
	ExitChanges = 2
	// ExitInvalid: the input must change: unknown flag or command, bad
	// values (schema, the chart's rules), a validate check failed, the
	// release exists (install) or does not (upgrade, uninstall).
	ExitInvalid = 3
)

const exitCodesHelp = `Exit codes:
  0  success; plan: nothing would change; validate/preflight: no check failed
  1  the operation failed (cluster or edge unreachable, the API server
     refused, timeout), or a preflight check failed
  2  plan: the install or upgrade would change something
  3  the input must change: bad flags, invalid values, a validate check
     failed, the release already exists (install) or does not (upgrade,
     uninstall)`

// Env is what the program runs with. Tests set CRDs to apply another CRD
// set than the chart's crds/.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Getenv reads the environment (TUNA_API_KEY); os.Getenv when nil.
	Getenv func(string) string
	// Version of the CLI: the build's stamps (internal/version) when empty.
	Version version.Info
	// CRDs replace the chart's crds/ for install, upgrade, plan and
	// preflight (tests only: the CLI has no flag for it).
	CRDs []*unstructured.Unstructured
}

// Run runs the command line args and returns the exit code.
func Run(ctx context.Context, args []string, env Env) int {
	if env.Stdout == nil {
		env.Stdout = os.Stdout
	}
	if env.Stderr == nil {
		env.Stderr = os.Stderr
	}
	if env.Stdin == nil {
		env.Stdin = os.Stdin
	}
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if env.Version.Version == "" {
		env.Version = version.Get()
	}
	a := &app{env: env}
	root := a.root()
	root.SetArgs(args)
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	return a.report(err)
}

// exitError ends the program with a code; a nil err prints nothing.
type exitError struct {
	code int
	err  error
	hint string
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func exitCode(code int) error { return &exitError{code: code} }

func (a *app) report(err error) int {
	code, hint := ExitFailed, ""
	var ee *exitError
	var ie *values.InvalidError
	var re *release.Error
	var ce *cluster.ConnectError
	switch {
	case errors.As(err, &ee):
		code, hint = ee.code, ee.hint
		if ee.err == nil {
			return code
		}
		err = ee.err
	case errors.As(err, &ie):
		code, hint = ExitInvalid, ie.Hint
	case errors.As(err, &re):
		hint = re.Hint
		if re.Invalid {
			code = ExitInvalid
		}
	case errors.As(err, &ce):
		code = ExitFailed
	case !a.started:
		code = ExitInvalid
		hint = "see " + a.cmdPath + " --help"
	}
	if hint == "" && code == ExitInvalid {
		// An error of the input always says where to look.
		hint = "see " + a.cmdPath + " --help"
	}
	fmt.Fprintln(a.env.Stderr, "Error: "+err.Error())
	if hint != "" {
		fmt.Fprintln(a.env.Stderr, "Hint: "+hint)
	}
	return code
}

type app struct {
	env Env
	// started is set once flags and arguments were accepted: errors
	// before it are usage errors.
	started bool
	cmdPath string

	kube      cluster.Flags
	namespace string
	release   string
	debug     bool
}

func (a *app) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "tuna-operator",
		Short: "Install, upgrade, check and inspect the Tuna Kubernetes operator",
		Long: `tuna-operator is the companion CLI of the Tuna Kubernetes operator. It embeds
the Helm chart ` + chart.Name + ` and drives the Helm 4 SDK:

  render     print the manifests for some values (like helm template)
  validate   check values against the schema and the chart's rules (and the cluster)
  plan       show what an install or upgrade would change (server-side dry run)
  install    apply the CRDs, then install the release
  upgrade    apply the CRDs, then upgrade the release (Helm never upgrades CRDs)
  uninstall  delete Tunnels, SecretSyncs, Domains, TCPEndpoints and
             AccessPolicies, wait for their finalizers, then remove the
             release (and the CRDs with --delete-crds)
  preflight  check the cluster, the values and the edge before an install
  status     list Tunnels, Domains, TCPEndpoints, SecretSyncs, AccessPolicies,
             LoadBalancer Services, Gateways and HTTPRoutes with address
             and health
  access     make a shareable link of an AccessPolicy

Values are given as with Helm: -f values.yaml (repeatable) and --set a.b=c.
Results go to stdout, progress and errors to stderr.

` + exitCodesHelp,
		SilenceErrors: true,
		SilenceUsage:  true,
		// --version prints the first line of `version`.
		Version: a.env.Version.String(),
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			a.started = true
			return nil
		},
	}
	root.SetVersionTemplate("tuna-operator {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		a.cmdPath = c.CommandPath()
		return err
	})
	a.cmdPath = "tuna-operator"
	pf := root.PersistentFlags()
	a.kube.AddFlags(pf)
	pf.StringVarP(&a.namespace, "namespace", "n", chart.DefaultNamespace, "namespace of the release (status: only this namespace's resources)")
	pf.BoolVar(&a.debug, "debug", false, "print the Helm SDK's debug log to stderr")
	root.AddCommand(a.renderCmd(), a.validateCmd(), a.planCmd(), a.installCmd(), a.upgradeCmd(),
		a.uninstallCmd(), a.preflightCmd(), a.statusCmd(), a.accessCmd(), a.versionCmd())
	for _, c := range root.Commands() {
		c.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
			a.cmdPath = c.CommandPath()
			return err
		})
	}
	return root
}

func (a *app) releaseFlag(cmd *cobra.Command) {
	cmd.Flags().StringVar(&a.release, "release", chart.DefaultReleaseName, "name of the Helm release")
}

// output is the -o flag of a command.
type output struct {
	value   string
	allowed []string
}

func (a *app) outputFlag(cmd *cobra.Command, o *output, def string, allowed ...string) {
	o.allowed = allowed
	cmd.Flags().StringVarP(&o.value, "output", "o", def, "output format: "+strings.Join(allowed, " or "))
}

func (o *output) check() error {
	for _, v := range o.allowed {
		if o.value == v {
			return nil
		}
	}
	return &exitError{code: ExitInvalid, err: fmt.Errorf("unknown output format %q", o.value), hint: "use -o " + strings.Join(o.allowed, " or -o ")}
}

func (o *output) json() bool { return o.value == "json" }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// connect loads the kubeconfig; it does not call the API server.
func (a *app) connect() (*cluster.Cluster, error) {
	return a.kube.Connect()
}

// connectAndPing connects and checks the API server answers.
func (a *app) connectAndPing(ctx context.Context) (*cluster.Cluster, error) {
	c, err := a.kube.Connect()
	if err != nil {
		return nil, err
	}
	if _, err := c.Ping(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func (a *app) progress() io.Writer { return a.env.Stderr }

// writeReport prints a check report as text or JSON and turns a failed
// check into the exit code failed.
func (a *app) writeReport(out *output, rep *report.Report, failed int) error {
	if out.json() {
		if err := rep.WriteJSON(a.env.Stdout); err != nil {
			return err
		}
	} else {
		rep.WriteText(a.env.Stdout)
	}
	if rep.Failed() {
		return exitCode(failed)
	}
	return nil
}
