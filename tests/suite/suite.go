// Package suite is what the test suites that start their own control
// plane share: their TestMain (the control plane, the edge, the
// operator's components as the chart's ServiceAccounts, stopped and
// checked at the end), a fresh namespace per test, and the waits for an
// object's conditions and for its deletion.
package suite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// Env is a suite's running setup.
type Env struct {
	CP *harness.ControlPlane
	// Edge is the running edge. A test that restarts it puts the new one
	// here: the suite's end closes whichever runs.
	Edge *harness.Edge
	// Dir is the suite's temporary folder, removed at its end; EdgeDir
	// holds the edge's state (Dir, or Options.EdgeSubdir below it).
	Dir, EdgeDir string
	// IDs are the chart's ServiceAccounts the components run as (nil with
	// Options.AsAdmin).
	IDs *harness.Identities
	// Controller and Agent are the running components. A test that stops
	// one for good sets nil here; one that restarts it, the new one.
	Controller, Agent *harness.Component
	// Wait bounds each wait of the suite's helpers.
	Wait time.Duration

	namespaces atomic.Int32
}

// Options say what a suite starts, in this order: the control plane and
// its namespaces, Before, the edge, the components, Start.
type Options struct {
	// Name names the suite in its setup's errors.
	Name string
	// Namespaces are created before the components start, besides the
	// operator's own (the chart's Roles go into the watched ones).
	Namespaces []string
	// NoOperatorNamespace leaves the operator's namespace to the suite's
	// tests (the CLI's install makes it).
	NoOperatorNamespace bool
	// GatewayAPI installs the Gateway API's CRDs before the components
	// start, which turn Gateway support on only when they are served.
	GatewayAPI bool
	// Before runs once the control plane runs, before the edge starts;
	// the stop it returns (or nil) runs after the edge's.
	Before func(*Env) (stop func(), err error)
	// Edge gives the edge's options (nil: the defaults).
	Edge func(*Env) (harness.EdgeOptions, error)
	// EdgeSubdir is the edge's state folder below Dir ("": Dir).
	EdgeSubdir string
	// Values render the chart's ServiceAccounts (ChartIdentitiesWith; nil:
	// the chart's defaults).
	Values map[string]any
	// AsAdmin runs the components as the test's administrator instead of
	// the chart's ServiceAccounts.
	AsAdmin bool
	// NoComponents starts neither component: the suite runs its own.
	NoComponents bool
	// Controller and Agent change the components' options.
	Controller []func(*app.ControllerOptions)
	Agent      []func(*app.AgentOptions)
	// Start runs last, for what else the suite needs; the stop it returns
	// (or nil) runs first at the end.
	Start func(*Env) (stop func(), err error)
	// Wait bounds each wait of the helpers (0: 30 s).
	Wait time.Duration
}

// Main runs the suite's tests between its setup, into env, and its
// teardown, and exits with their code: 1 when the setup failed or a
// component ended with an error.
func Main(m *testing.M, env *Env, o Options) {
	harness.UseTestLogger()
	code, err := run(m, env, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", o.Name, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func run(m *testing.M, env *Env, o Options) (int, error) {
	ctx := context.Background()
	env.Wait = o.Wait
	if env.Wait == 0 {
		env.Wait = 30 * time.Second
	}
	cp, err := harness.StartControlPlane()
	if err != nil {
		return 0, fmt.Errorf("setup: %w", err)
	}
	defer func() { _ = cp.Stop() }()
	env.CP = cp
	namespaces := o.Namespaces
	if !o.NoOperatorNamespace {
		namespaces = append([]string{harness.OperatorNamespace}, namespaces...)
	}
	for _, ns := range namespaces {
		if _, err := cp.Namespace(ctx, ns); err != nil {
			return 0, fmt.Errorf("setup: %w", err)
		}
	}
	if o.GatewayAPI {
		if err := cp.InstallGatewayAPI(); err != nil {
			return 0, fmt.Errorf("setup: %w", err)
		}
	}
	if env.Dir, err = os.MkdirTemp("", "tuna-suite-"); err != nil {
		return 0, fmt.Errorf("setup: %w", err)
	}
	defer func() { _ = os.RemoveAll(env.Dir) }()
	env.EdgeDir = filepath.Join(env.Dir, o.EdgeSubdir)
	if o.Before != nil {
		stop, err := o.Before(env)
		if err != nil {
			return 0, fmt.Errorf("setup: %w", err)
		}
		if stop != nil {
			defer stop()
		}
	}
	var edgeOptions harness.EdgeOptions
	if o.Edge != nil {
		if edgeOptions, err = o.Edge(env); err != nil {
			return 0, fmt.Errorf("setup: %w", err)
		}
	}
	if env.Edge, err = harness.StartEdge(ctx, env.EdgeDir, edgeOptions); err != nil {
		return 0, fmt.Errorf("setup: %w", err)
	}
	defer func() { _ = env.Edge.Close() }()
	if !o.NoComponents {
		controllerID, agentID := cp.Config, cp.Config
		if !o.AsAdmin {
			if env.IDs, err = cp.ChartIdentitiesWith(ctx, o.Values); err != nil {
				return 0, fmt.Errorf("setup: %w", err)
			}
			controllerID, agentID = env.IDs.Controller, env.IDs.Agent
		}
		env.Controller = harness.StartController(controllerID, env.Edge, o.Controller...)
		env.Agent = harness.StartAgent(agentID, o.Agent...)
	}
	if o.Start != nil {
		stop, err := o.Start(env)
		if err != nil {
			return 0, fmt.Errorf("setup: %w", err)
		}
		if stop != nil {
			defer stop()
		}
	}
	code := m.Run()
	var errs []error
	if env.Agent != nil {
		if err := env.Agent.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("agent: %w", err))
		}
	}
	if env.Controller != nil {
		if err := env.Controller.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("controller: %w", err))
		}
	}
	return code, errors.Join(errs...)
}

// Namespace creates a fresh namespace for a test, named
// "<prefix>-<n>-<what>" (what in lower case, "/" and "_" as "-", the
// whole cut to 50 characters); n is unique in the suite's process.
func (e *Env) Namespace(t testing.TB, prefix, what string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d-%s", prefix, e.namespaces.Add(1), strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(what)))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-")
	if _, err := e.CP.Namespace(context.Background(), name); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	return name
}
