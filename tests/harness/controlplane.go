// Package harness starts the real parts the end-to-end tests and the demo
// run on: etcd and kube-apiserver built from pinned modules, the tuna edge
// on loopback, the operator's controller and agent, and backends listening
// on Services' ClusterIPs.
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// ServiceCIDR is the apiserver's service range: inside 127.0.0.0/8, so every
// ClusterIP is a loopback address a test backend can listen on and the agent
// dials exactly as it would in a cluster. Each test process gets its own
// /16 (127.10.0.0/16 and up): with one range for all, two packages' control
// planes could give two Services the same ClusterIP, and their backends
// would collide on IP and port.
func ServiceCIDR() (string, error) {
	slot, err := ports.Slot()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.%d.0.0/16", 10+slot%240), nil
}

// RepoRoot is the repository's top folder.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Tools builds (or finds cached) kube-apiserver and etcd and returns their
// folder. Progress goes to stderr.
func Tools() (string, error) {
	return ToolsWith(context.Background(), os.Stderr)
}

// ToolsWith is Tools with progress to progress; names are the binaries to
// make sure of (TUNA_TOOLS; none: the build script's default,
// kube-apiserver, etcd and kubectl, or what TUNA_TOOLS names). Ending ctx
// ends the build, compilers included.
func ToolsWith(ctx context.Context, progress io.Writer, names ...string) (string, error) {
	if dir := os.Getenv("TUNA_TEST_BINARIES"); dir != "" {
		return dir, nil
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(RepoRoot(), "tests", "tools", "build.sh"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if len(names) > 0 {
		cmd.Env = append(os.Environ(), "TUNA_TOOLS="+strings.Join(names, " "))
	}
	cmd.Stderr = progress
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building the Kubernetes tools (tests/tools/build.sh): %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

// ControlPlane is a running etcd and kube-apiserver with the CRDs installed.
type ControlPlane struct {
	Env    *envtest.Environment
	Config *rest.Config
	Client client.Client
}

// StartControlPlane starts etcd and kube-apiserver and installs crds/.
func StartControlPlane() (*ControlPlane, error) {
	return StartControlPlaneWith(ControlPlaneOptions{})
}

// ControlPlaneOptions tune a control plane; zero values are fine.
type ControlPlaneOptions struct {
	// EtcdLog and APIServerLog receive each process's output (none: it
	// is dropped).
	EtcdLog, APIServerLog io.Writer
	// Tools is the folder of kube-apiserver and etcd ("": Tools()).
	Tools string
}

// StartControlPlaneWith is StartControlPlane with options.
func StartControlPlaneWith(o ControlPlaneOptions) (*ControlPlane, error) {
	bin := o.Tools
	if bin == "" {
		var err error
		if bin, err = Tools(); err != nil {
			return nil, err
		}
	}
	cidr, err := ServiceCIDR()
	if err != nil {
		return nil, err
	}
	// Each attempt takes fresh ports: envtest retries a failed start on the
	// same ports, where a process of the failed attempt may still linger.
	var errs []error
	for range startAttempts {
		cp, err := startControlPlane(bin, cidr, o)
		if err == nil {
			return cp, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("starting etcd and kube-apiserver (%d attempts): %w", startAttempts, errors.Join(errs...))
}

const (
	startAttempts = 3
	// startTimeout is how long etcd and kube-apiserver each get to become
	// ready; envtest's 20 s default is too short when several control
	// planes start at once on two busy cores.
	startTimeout = 2 * time.Minute
)

func startControlPlane(bin, cidr string, o ControlPlaneOptions) (*ControlPlane, error) {
	env := &envtest.Environment{
		BinaryAssetsDirectory:    bin,
		CRDDirectoryPaths:        []string{filepath.Join(RepoRoot(), "crds")},
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: startTimeout,
	}
	api := env.ControlPlane.GetAPIServer()
	api.Configure().Set("service-cluster-ip-range", cidr)
	api.Out, api.Err = o.APIServerLog, o.APIServerLog
	// envtest's own port picking listens on :0 and closes, racing with other
	// processes' outbound connections; take this process's ports instead.
	first, err := ports.Take(3)
	if err != nil {
		return nil, err
	}
	api.Address, api.Port = "127.0.0.1", strconv.Itoa(first) // its secure serving address
	env.ControlPlane.Etcd = &envtest.Etcd{URL: &url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(first+1))}}
	env.ControlPlane.Etcd.Configure().Set("listen-peer-urls", "http://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(first+2)))
	env.ControlPlane.Etcd.Out, env.ControlPlane.Etcd.Err = o.EtcdLog, o.EtcdLog
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: app.Scheme()})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return &ControlPlane{Env: env, Config: cfg, Client: c}, nil
}

// Stop stops the apiserver and etcd.
func (cp *ControlPlane) Stop() error { return cp.Env.Stop() }

// WriteKubeconfig writes a kubeconfig for kubectl to path.
func (cp *ControlPlane) WriteKubeconfig(path string) error {
	return cp.WriteKubeconfigAs(path, rest.ImpersonationConfig{})
}

// WriteKubeconfigAs writes a kubeconfig that acts as as (the identities of
// ChartIdentities), for a component that runs as a process of its own.
func (cp *ControlPlane) WriteKubeconfigAs(path string, as rest.ImpersonationConfig) error {
	user, err := cp.Env.ControlPlane.AddUser(envtestAdmin, nil)
	if err != nil {
		return fmt.Errorf("creating a kubectl user: %w", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("rendering kubeconfig: %w", err)
	}
	cfg, err := clientcmd.Load(kc)
	if err != nil {
		return err
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate, auth.ImpersonateGroups = as.UserName, as.Groups
	}
	renameContext(cfg, "tuna-demo")
	return clientcmd.WriteToFile(*cfg, path)
}

// Namespace creates a namespace and returns its name.
func (cp *ControlPlane) Namespace(ctx context.Context, name string) (string, error) {
	return name, createNamespace(ctx, cp.Client, name)
}

func renameContext(cfg *clientcmdapi.Config, name string) {
	for old, ctx := range cfg.Contexts {
		delete(cfg.Contexts, old)
		cfg.Contexts[name] = ctx
	}
	cfg.CurrentContext = name
}
