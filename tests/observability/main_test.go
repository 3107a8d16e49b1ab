// Package observability puts Prometheus itself in the loop: the real
// server, built from the pinned github.com/prometheus/prometheus module by
// tests/tools/prometheus (its own module, never the product's go.mod),
// scrapes the controller and the agent (each the shipped binary, in its own
// process, as the chart's ServiceAccount) and the edge while real traffic
// flows. Its PromQL engine evaluates every query of the chart's dashboards,
// read from chart/tuna-k8s-operator/dashboards/, and its rule manager
// loads the chart's rendered PrometheusRule; each alert is made to fire by
// causing its condition.
package observability

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
	"code.tuna.am/tuna/k8s-operator/tests/suite"
)

// env is the shared setup: one control plane, edge, controller, agent and
// Prometheus for the package; each test works in its own namespaces.
var env struct {
	suite.Env
	// controller and agent are the operator's processes.
	controller, agent *process
	prom              *prometheus
}

func TestMain(m *testing.M) {
	var promBin, operatorBin string
	suite.Main(m, &env.Env, suite.Options{
		Name:       "observability",
		Wait:       wait,
		EdgeSubdir: "edge",
		Before: func(e *suite.Env) (func(), error) {
			var err error
			if promBin, err = buildPrometheus(); err != nil {
				return nil, err
			}
			operatorBin = filepath.Join(e.Dir, "tuna-k8s-operator")
			build := exec.Command("go", "build", "-o", operatorBin, "./operator/cmd/tuna-k8s-operator")
			build.Dir, build.Stderr = harness.RepoRoot(), os.Stderr
			if err := build.Run(); err != nil {
				return nil, fmt.Errorf("building the operator: %w", err)
			}
			return nil, nil
		},
		Edge: func(*suite.Env) (harness.EdgeOptions, error) {
			return harness.EdgeOptions{KeepaliveInterval: time.Second, KeepaliveTimeout: 3 * time.Second}, nil
		},
		// The components run as processes of the binary the image ships.
		NoComponents: true,
		Start:        func(e *suite.Env) (func(), error) { return start(e, promBin, operatorBin) },
	})
}

// start runs the controller and the agent, each the shipped binary in its
// own process as the chart's ServiceAccount with exactly the RBAC the
// chart grants, and Prometheus scraping them and the edge.
func start(e *suite.Env, promBin, operatorBin string) (stop func(), err error) {
	ctx := context.Background()
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	ids, err := e.CP.ChartIdentities(ctx)
	if err != nil {
		return stop, err
	}
	targets := map[string]string{}
	for _, c := range []string{"controller", "agent"} {
		if targets[c], err = ports.TakeAddr(); err != nil {
			return stop, err
		}
	}
	keyFile := filepath.Join(e.Dir, "api-key")
	if err := os.WriteFile(keyFile, []byte(e.Edge.OperatorKey), 0o600); err != nil {
		return stop, err
	}
	kubeconfig := func(name string, cfg *rest.Config) (string, error) {
		path := filepath.Join(e.Dir, name+".kubeconfig")
		return path, writeKubeconfig(path, cfg)
	}
	ctrlKC, err := kubeconfig("controller", ids.Controller)
	if err != nil {
		return stop, err
	}
	agentKC, err := kubeconfig("agent", ids.Agent)
	if err != nil {
		return stop, err
	}
	common := []string{"--namespace=" + harness.OperatorNamespace, "--health-probe-bind-address=0"}
	env.controller, err = startProcess("controller", operatorBin, []string{"KUBECONFIG=" + ctrlKC},
		append([]string{"controller", "--metrics-bind-address=" + targets["controller"],
			"--edge-api-url=" + e.Edge.APIURL(), "--edge-api-fingerprint=" + e.Edge.APIFingerprint(),
			"--api-key-file=" + keyFile, "--cluster-id=" + harness.TestClusterID}, common...)...)
	if err != nil {
		return stop, err
	}
	stops = append(stops, func() { env.controller.stop() })
	env.agent, err = startProcess("agent", operatorBin, []string{"KUBECONFIG=" + agentKC},
		append([]string{"agent", "--metrics-bind-address=" + targets["agent"],
			"--keepalive-interval=1s", "--keepalive-timeout=3s"}, common...)...)
	if err != nil {
		return stop, err
	}
	stops = append(stops, func() { env.agent.stop() })

	// The edge's /metrics is on its API listener, HTTPS: Prometheus trusts
	// the API certificate as docs/edge.md says to.
	cert, err := server.ReadAPICertificate(e.EdgeDir, "")
	if err != nil {
		return stop, err
	}
	caFile := filepath.Join(e.Dir, "edge-api-ca.pem")
	if err := writeCertPEM(caFile, cert.Raw); err != nil {
		return stop, err
	}
	targets["edge"] = strings.TrimPrefix(e.Edge.APIURL(), "https://")
	env.prom, err = startPrometheus(promBin, filepath.Join(e.Dir, "prometheus"), targets, caFile)
	if err != nil {
		return stop, err
	}
	stops = append(stops, func() { env.prom.stop() })
	return stop, nil
}

// buildPrometheus builds (or finds cached) the Prometheus server from the
// pinned tools module and returns its path. Progress goes to stderr.
func buildPrometheus() (string, error) {
	if bin := os.Getenv("TUNA_PROMETHEUS"); bin != "" {
		return bin, nil
	}
	cmd := exec.Command("bash", filepath.Join(harness.RepoRoot(), "tests", "tools", "prometheus", "build.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building prometheus (tests/tools/prometheus/build.sh): %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

// writeKubeconfig writes cfg (the apiserver's address, its CA, the test
// admin's client certificate and the impersonation of a ServiceAccount)
// as a kubeconfig for a component's process.
func writeKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken,
		Impersonate: cfg.Impersonate.UserName, ImpersonateGroups: cfg.Impersonate.Groups}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	return clientcmd.WriteToFile(*kc, path)
}

// process is a component running as its own OS process; its output is kept
// for the log of a failed test.
type process struct {
	name string
	cmd  *exec.Cmd
	out  *logBuffer
	done chan struct{}
}

func startProcess(name, bin string, env []string, args ...string) (*process, error) {
	p := &process{name: name, out: &logBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	// The child dies with the test binary, even when that is killed.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

// stop asks the process to end and kills it after 15 s.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
