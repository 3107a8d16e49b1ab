// Package node runs a real one-node Kubernetes cluster for tests: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy
// (iptables), containerd with runc and the CNI bridge, and a kubelet, all
// built from the tools module's pins (tests/tools) or installed from
// Debian (hack/node-deps.sh), in a network namespace the cluster owns.
//
// The host is outside the cluster, as the internet is: it reaches the
// apiserver at Net.NodeIP:6443 and pods and ClusterIPs through the node;
// pods reach the host at Net.HostIP (where a test runs what would run on
// a VPS). Images come from tarballs (ImportImages): nothing is pulled.
//
// Start claims a cluster index (StateRoot) and first sweeps what any
// crashed run left; Stop removes every process, mount, cgroup, link and
// file the cluster made. Several test binaries may each run a cluster at
// once. It needs root and cgroups (v1 or v2).
package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// NodeName is the node's name (and its kubelet's client identity).
const NodeName = "tuna-node"

// KubernetesVersion is the version of the components, as tests/tools
// builds them.
const KubernetesVersion = "v1.37.2"

// Options tune a cluster; zero values are fine.
type Options struct {
	// LogDir receives one log file per component; by default the
	// cluster's own folder, removed by Stop. Give a folder of the test's
	// to keep them.
	LogDir string
	// Tools is the folder of the Kubernetes binaries; by default
	// tests/tools/build.sh builds (or finds cached) them.
	Tools string
	// Progress receives one line per step (default: discarded).
	Progress io.Writer
	// APIServerArgs are extra kube-apiserver flags, "--name=value".
	APIServerArgs []string
}

// Cluster is a running node cluster.
type Cluster struct {
	Index int
	// Dir is the cluster's folder under StateRoot.
	Dir string
	Net Network
	// Kubeconfig is an admin's (system:masters) kubeconfig file; Config
	// and Client act as that admin.
	Kubeconfig string
	Config     *rest.Config
	Client     kubernetes.Interface
	// Tools is the folder of the Kubernetes binaries (kubectl among them).
	Tools string
	// Started is how long Start took, from nothing to a Ready node.
	Started time.Duration

	opts              Options
	lock              *os.File
	pki               *pki
	systemCgroupProcs string
	procs             map[string]*process
	order             []string
}

// The components, in the order they start.
const (
	Etcd                  = "etcd"
	APIServer             = "kube-apiserver"
	ControllerManager     = "kube-controller-manager"
	Scheduler             = "kube-scheduler"
	Containerd            = "containerd"
	Kubelet               = "kubelet"
	KubeProxy             = "kube-proxy"
	apiServerPort         = 6443
	nodeToolsForBuildHint = "kube-apiserver etcd kubectl kubelet kube-proxy kube-scheduler kube-controller-manager"
)

// Start brings a cluster up and waits until its node is Ready, its
// service accounts and root CA ConfigMap are made and kube-proxy serves.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	begin := time.Now()
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("node: the node cluster needs root (network namespaces, mounts, cgroups)")
	}
	if err := installDeps(o.Progress); err != nil {
		return nil, err
	}
	if o.Tools == "" {
		bin, err := buildTools()
		if err != nil {
			return nil, err
		}
		o.Tools = bin
	}
	index, lock, err := claim()
	if err != nil {
		return nil, err
	}
	c := &Cluster{Index: index, Dir: filepath.Join(StateRoot, strconv.Itoa(index)), lock: lock, opts: o, Tools: o.Tools, procs: map[string]*process{}}
	c.Net = networkFor(index, c.Dir)
	if c.opts.LogDir == "" {
		c.opts.LogDir = filepath.Join(c.Dir, "logs")
	}
	if err := c.start(ctx); err != nil {
		err = fmt.Errorf("node cluster %d: %w%s", index, err, c.logHint())
		_ = c.Stop()
		return nil, err
	}
	c.Started = time.Since(begin)
	return c, nil
}

func (c *Cluster) progress(format string, args ...any) {
	fmt.Fprintf(c.opts.Progress, "node: "+format+"\n", args...)
}

func (c *Cluster) logHint() string {
	return "; the components' logs are in " + c.opts.LogDir
}

func (c *Cluster) start(ctx context.Context) error {
	for _, d := range []string{c.Dir, filepath.Join(c.Dir, "pids"), c.opts.LogDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := c.makeCgroups(); err != nil {
		return err
	}
	c.progress("network namespace %s: node %s, host %s, pods %s, services %s", c.Net.NetNS, c.Net.NodeIP, c.Net.HostIP, c.Net.PodCIDR, c.Net.ServiceCIDR)
	if err := c.Net.setUp(c.Index); err != nil {
		return err
	}
	if err := c.writeConfig(); err != nil {
		return err
	}
	for _, name := range c.order {
		c.progress("starting %s", name)
		if err := c.run(c.procs[name]); err != nil {
			return err
		}
		if err := c.awaitComponent(ctx, name); err != nil {
			return err
		}
		if name == Containerd {
			if err := c.importPause(ctx); err != nil {
				return err
			}
		}
	}
	return c.awaitNode(ctx)
}

// makeCgroups makes the cluster's cgroup in every hierarchy (the kubelet's
// cgroupRoot must exist in all), with system/ for the components in the
// tracking one.
func (c *Cluster) makeCgroups() error {
	track, err := trackingHierarchy()
	if err != nil {
		return err
	}
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, cgroupName(c.Index))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("making cgroup %s: %w", dir, err)
		}
		// A new v1 cpuset starts with no CPUs and no memory nodes: give it
		// its parent's, or nothing can join it.
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err == nil {
					_ = os.WriteFile(filepath.Join(dir, f), v, 0o644)
				}
			}
		}
	}
	sys := filepath.Join(track, cgroupName(c.Index), "system")
	if err := os.MkdirAll(sys, 0o755); err != nil {
		return err
	}
	c.systemCgroupProcs = filepath.Join(sys, "cgroup.procs")
	return nil
}

// Stop ends every component and the pods, and removes everything the
// cluster made. The logs stay when Options.LogDir was given.
func (c *Cluster) Stop() error {
	var errs []error
	// The kubelet first, so that it restarts nothing; the rest are killed
	// with the cgroup tree.
	for i := len(c.order) - 1; i >= 0; i-- {
		if p := c.procs[c.order[i]]; p != nil {
			_ = p.stop(syscall.SIGKILL, 10*time.Second)
		}
	}
	// The pods' logs live in the cluster's folder: keep them with the
	// components' when those are kept.
	if !strings.HasPrefix(c.opts.LogDir, c.Dir+"/") {
		if out, err := exec.Command("cp", "-r", filepath.Join(c.Dir, "pod-logs"), filepath.Join(c.opts.LogDir, "pods")).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("keeping the pods' logs: %w: %s", err, out))
		}
	}
	if err := sweep(c.Index); err != nil {
		errs = append(errs, err)
	}
	if c.lock != nil {
		_ = c.lock.Close()
	}
	return errors.Join(errs...)
}

// StopComponent stops one component (SIGTERM, then SIGKILL after 30 s),
// as a crash or an operator would; what it started keeps running (pods
// outlive the kubelet and containerd).
func (c *Cluster) StopComponent(name string) error {
	p, ok := c.procs[name]
	if !ok {
		return fmt.Errorf("node: no component %q", name)
	}
	return p.stop(syscall.SIGTERM, 30*time.Second)
}

// StartComponent starts a stopped component again and waits until it
// serves.
func (c *Cluster) StartComponent(ctx context.Context, name string) error {
	p, ok := c.procs[name]
	if !ok {
		return fmt.Errorf("node: no component %q", name)
	}
	if err := c.run(p); err != nil {
		return err
	}
	return c.awaitComponent(ctx, name)
}

// Kubectl runs the tools' kubectl as the admin and returns its output.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.Tools, "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// ImportImages imports a tarball of images (the format of `docker save`
// or an OCI archive) into the node's containerd, where the kubelet finds
// them without a pull.
func (c *Cluster) ImportImages(ctx context.Context, tarball string) error {
	cmd := exec.CommandContext(ctx, "ctr", "--address", c.containerdSocket(), "-n", "k8s.io", "images", "import", "--no-unpack=false", tarball)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images import %s: %w: %s", tarball, err, out)
	}
	return nil
}

// HTTPClient is an HTTP client whose connections start inside the node's
// network namespace (pod IPs, ClusterIPs, the node's loopback).
func (c *Cluster) HTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = c.Net.DialContext
	tr.Proxy = nil
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// Logs is the folder of the components' logs.
func (c *Cluster) Logs() string { return c.opts.LogDir }

func buildTools() (string, error) {
	if dir := os.Getenv("TUNA_TEST_BINARIES"); dir != "" {
		return dir, nil
	}
	cmd := exec.Command("bash", filepath.Join(repoRoot(), "tests", "tools", "build.sh"))
	cmd.Env = append(os.Environ(), "TUNA_TOOLS="+nodeToolsForBuildHint)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building the Kubernetes components (tests/tools/build.sh): %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

func installDeps(progress io.Writer) error {
	cmd := exec.Command("bash", filepath.Join(repoRoot(), "hack", "node-deps.sh"))
	cmd.Stdout, cmd.Stderr = progress, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("installing containerd, runc, the CNI plugins and iptables (hack/node-deps.sh): %w", err)
	}
	return nil
}

func (c *Cluster) adminClient() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 100, 200
	c.Config = cfg
	c.Client, err = kubernetes.NewForConfig(cfg)
	return err
}

// KillComponent ends one component with SIGKILL, as a crash does; what it
// started keeps running.
func (c *Cluster) KillComponent(name string) error {
	p, ok := c.procs[name]
	if !ok {
		return fmt.Errorf("node: no component %q", name)
	}
	return p.stop(syscall.SIGKILL, 30*time.Second)
}

// ContainerProcesses are the pids of a container's processes, by its CRI
// id (a pod's status.containerStatuses[].containerID, with or without
// "containerd://"), read from its cgroup.
func (c *Cluster) ContainerProcesses(containerID string) ([]int, error) {
	id := containerID[strings.LastIndex(containerID, "/")+1:]
	h, err := trackingHierarchy()
	if err != nil {
		return nil, err
	}
	var dir string
	_ = filepath.WalkDir(filepath.Join(h, cgroupName(c.Index)), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == id {
			dir = p
			return filepath.SkipAll
		}
		return nil
	})
	if dir == "" {
		return nil, fmt.Errorf("node: no cgroup for container %s", id)
	}
	return cgroupPids(dir), nil
}
