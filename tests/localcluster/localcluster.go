// Package localcluster runs the product on this machine as the chart
// installs it in a cluster: a real kube-apiserver and etcd,
// kube-controller-manager with the namespace and garbage collector
// controllers (namespace deletion and owner references behave as on a
// cluster), everything the chart renders (its CRDs, the IngressClass and
// GatewayClass tuna, RBAC, ServiceAccounts, the key Secret) applied from
// the chart's own render, the Gateway API's standard CRDs from the pinned
// module, the tuna edge on loopback, and the operator's controller and
// agent replicas as processes of the shipped binary with the arguments,
// environment and files of the rendered Deployments' pods. Every
// component logs to a file of its own. The cluster has no nodes: a
// Service's ClusterIP is a loopback address, where ServeServices answers
// as a pod behind it would.
//
// The demo (tests/demo) and the docs' snippets (tests/docs) run on it.
package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"code.tuna.am/tuna/k8s-operator/chart"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// Options of a local cluster.
type Options struct {
	// Dir holds the state: logs/, the kubeconfig, the env file, the edge's
	// data and the pods' files. It is emptied first.
	Dir string
	// Operator is the shipped tuna-k8s-operator binary
	// (harness.BuildOperator).
	Operator string
	// Tools is the folder of kube-apiserver and etcd ("": harness.Tools()).
	Tools string
	// ControllerManager is the kube-controller-manager binary; "" starts
	// none now (StartControllerManager starts it later).
	ControllerManager string
	// HTTPListen is the edge's public HTTP address ("": a free port).
	HTTPListen string
	// Values are chart values set over the ones that point the operator
	// at this edge.
	Values map[string]any
	// ServeServices answers on every Service's ClusterIP and ports, as a
	// pod behind it would (ServeServices).
	ServeServices bool
	// Path lists folders put first on PATH in the env file (kubectl,
	// tuna-edge, tuna-operator).
	Path []string
	// Progress, when set, is told each step.
	Progress func(string)
}

// Cluster is a running local cluster.
type Cluster struct {
	CP   *harness.ControlPlane
	Edge *harness.Edge
	// Rendered is the chart as it was applied.
	Rendered *chart.Rendered
	// Dir is the state folder; Kubeconfig an admin's kubeconfig in it.
	Dir, Kubeconfig string
	// Env is a shell file that exports KUBECONFIG, the edge CLI's
	// TUNA_EDGE_API_URL, TUNA_EDGE_API_FINGERPRINT and TUNA_EDGE_API_KEY
	// (a full key), and PATH.
	Env string
	// Pods are the operator's replicas, as the Deployments make them.
	Pods []*Pod

	o        Options
	logs     map[string]string
	closers  []func() error
	kcm      *harness.Process
	services *services
}

// Values are the chart values of a local cluster: the edge's API, its
// certificate pin and the operator's key, bound to harness.TestClusterID,
// the GatewayClass (the Gateway API is installed here) and SecretSync.
func Values(edge *harness.Edge) map[string]any {
	return map[string]any{
		"edge":         map[string]any{"apiURL": edge.APIURL(), "apiFingerprint": edge.APIFingerprint()},
		"credentials":  map[string]any{"apiKey": edge.OperatorKey},
		"clusterID":    harness.TestClusterID,
		"gatewayClass": map[string]any{"enabled": true},
		"secretSync":   map[string]any{"enabled": true},
	}
}

// Start starts everything; on an error, what was started is stopped.
func Start(ctx context.Context, o Options) (c *Cluster, err error) {
	c = &Cluster{o: o, Dir: o.Dir, logs: map[string]string{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
			c = nil
		}
	}()
	if err := os.RemoveAll(o.Dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(o.Dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	c.step("starting etcd and kube-apiserver")
	etcdLog, err := c.logFile("etcd")
	if err != nil {
		return c, err
	}
	apiLog, err := c.logFile("kube-apiserver")
	if err != nil {
		return c, err
	}
	cp, err := harness.StartControlPlaneWith(harness.ControlPlaneOptions{EtcdLog: etcdLog, APIServerLog: apiLog, Tools: o.Tools})
	if err != nil {
		return c, err
	}
	c.CP = cp
	c.closers = append(c.closers, cp.Stop)
	c.Kubeconfig = filepath.Join(o.Dir, "kubeconfig")
	if err := cp.WriteKubeconfig(c.Kubeconfig); err != nil {
		return c, err
	}

	c.step("starting tuna-edge on loopback")
	edgeLog, err := c.logFile("edge")
	if err != nil {
		return c, err
	}
	c.Edge, err = harness.StartEdge(ctx, filepath.Join(o.Dir, "edge"), harness.EdgeOptions{HTTPListen: o.HTTPListen,
		Logger: slog.New(slog.NewTextHandler(edgeLog, nil))})
	if err != nil {
		return c, err
	}
	c.closers = append(c.closers, c.Edge.Close)

	c.step("installing what the chart installs, from its render, and the Gateway API's CRDs")
	vals := Values(c.Edge)
	for k, v := range o.Values {
		vals[k] = v
	}
	if c.Rendered, err = chart.Render(vals, chart.Options{Namespace: harness.OperatorNamespace}); err != nil {
		return c, fmt.Errorf("rendering the chart: %w", err)
	}
	if err := c.install(ctx); err != nil {
		return c, err
	}
	if o.ControllerManager != "" {
		if err := c.StartControllerManager(o.ControllerManager); err != nil {
			return c, err
		}
	}
	if o.ServeServices {
		if c.services, err = serveServices(ctx, c.CP.Config); err != nil {
			return c, err
		}
		c.closers = append(c.closers, c.services.close)
	}
	c.step("starting the operator: the controller and agent replicas of the chart's Deployments")
	if err := c.runDeployments(ctx); err != nil {
		return c, err
	}
	if err := c.writeEnv(); err != nil {
		return c, err
	}
	return c, nil
}

func (c *Cluster) step(msg string) {
	if c.o.Progress != nil {
		c.o.Progress(msg)
	}
}

// logFile opens the log of a component, logs/<name>.log.
func (c *Cluster) logFile(name string) (io.Writer, error) {
	path := filepath.Join(c.Dir, "logs", name+".log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	c.logs[name] = path
	c.closers = append(c.closers, f.Close)
	return f, nil
}

// Logs are the log files by component, in name order.
func (c *Cluster) Logs() []Log {
	var out []Log
	for name, path := range c.logs {
		out = append(out, Log{Component: name, Path: path})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Component < out[j].Component })
	return out
}

// Log is one component's log file.
type Log struct{ Component, Path string }

// StartControllerManager starts kube-controller-manager (bin) with the
// namespace and garbage collector controllers only: deleting a namespace
// deletes what is in it (finalizers run) and the namespace goes, and
// objects whose owners are gone are collected. Its identity is the
// admin's.
func (c *Cluster) StartControllerManager(bin string) error {
	if c.kcm != nil {
		return nil
	}
	path := filepath.Join(c.Dir, "logs", "kube-controller-manager.log")
	p, err := harness.StartProcess(path, nil, bin, "--kubeconfig="+c.Kubeconfig,
		"--controllers=namespace-controller,garbage-collector-controller",
		// No other controller runs, no other replica: no election, no
		// serving (nothing scrapes or probes it here).
		"--leader-elect=false", "--secure-port=0", "--use-service-account-credentials=false")
	if err != nil {
		return err
	}
	c.kcm = p
	c.logs["kube-controller-manager"] = path
	c.closers = append(c.closers, p.Stop)
	return nil
}

// ControllerManagerRuns reports whether kube-controller-manager was started
// and has not exited.
func (c *Cluster) ControllerManagerRuns() bool { return c.kcm != nil && !c.kcm.Exited() }

// Stop stops everything, the operator first, then the controller-manager,
// the edge and the control plane.
func (c *Cluster) Stop() error {
	var errs []error
	for _, p := range c.Pods {
		if err := p.proc.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.Name, err))
		}
	}
	c.Pods = nil
	for i := len(c.closers) - 1; i >= 0; i-- {
		if err := c.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	c.closers = nil
	return errors.Join(errs...)
}

// vars are the env file's variables but PATH: KUBECONFIG, and what
// tuna-edge's client commands (keys, secrets, owners) read.
func (c *Cluster) vars() [][2]string {
	return [][2]string{{"KUBECONFIG", c.Kubeconfig}, {"TUNA_EDGE_API_URL", c.Edge.APIURL()},
		{"TUNA_EDGE_API_FINGERPRINT", c.Edge.APIFingerprint()}, {"TUNA_EDGE_API_KEY", c.Edge.AdminKey}}
}

// writeEnv writes the env file.
func (c *Cluster) writeEnv() error {
	c.Env = filepath.Join(c.Dir, "env")
	var b strings.Builder
	b.WriteString("# The local cluster's environment, for a shell: . " + c.Env + "\n")
	for _, v := range c.vars() {
		fmt.Fprintf(&b, "export %s=%s\n", v[0], shellQuote(v[1]))
	}
	if len(c.o.Path) > 0 {
		quoted := make([]string, len(c.o.Path))
		for i, p := range c.o.Path {
			quoted[i] = shellQuote(p)
		}
		fmt.Fprintf(&b, "export PATH=%s:\"$PATH\"\n", strings.Join(quoted, ":"))
	}
	return os.WriteFile(c.Env, []byte(b.String()), 0o600)
}

// Environ is the env file's variables as KEY=VALUE, PATH included, for a
// process started from Go.
func (c *Cluster) Environ() []string {
	var env []string
	for _, v := range c.vars() {
		env = append(env, v[0]+"="+v[1])
	}
	return append(env, "PATH="+strings.Join(append(append([]string{}, c.o.Path...), os.Getenv("PATH")), ":"))
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// waitFor polls cond until it is true, ctx ends, the timeout passes or
// cond returns a permanent error.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		var p permanentError
		if errors.As(err, &p) {
			return fmt.Errorf("%s: %w", what, err)
		}
		last = err
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s: not within %s: %w", what, timeout, errors.Join(last, ctx.Err()))
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// permanentError ends a waitFor at once.
type permanentError struct{ error }

func (p permanentError) Unwrap() error { return p.error }
