package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// writeConfig writes the certificates, kubeconfigs and configuration files
// and sets each component's command line.
func (c *Cluster) writeConfig() error {
	p, err := newPKI(filepath.Join(c.Dir, "pki"))
	if err != nil {
		return err
	}
	c.pki = p
	node := c.Net.NodeIP.String()
	server := "https://" + net.JoinHostPort(node, strconv.Itoa(apiServerPort))
	errs := []error{
		p.issue("apiserver", "kube-apiserver", nil, node, c.Net.APIServerServiceIP().String(), "127.0.0.1", "localhost",
			"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"),
		p.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}),
		p.issue("admin", "tuna-node-admin", []string{"system:masters"}),
		p.issue("kubelet", "system:node:"+NodeName, []string{"system:nodes"}),
		p.issue("kubelet-server", NodeName, nil, node, NodeName),
		p.issue("kube-controller-manager", "system:kube-controller-manager", nil),
		p.issue("kube-scheduler", "system:kube-scheduler", nil),
		p.issue("kube-proxy", "system:kube-proxy", nil),
		p.serviceAccountKey(),
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	kc := map[string]string{}
	for _, name := range []string{"admin", "kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy"} {
		if kc[name], err = p.kubeconfig(name, server); err != nil {
			return err
		}
	}
	c.Kubeconfig = kc["admin"]
	if err := c.adminClient(); err != nil {
		return err
	}
	files := map[string]string{
		filepath.Join(c.Dir, "containerd", "config.toml"):             c.containerdConfig(),
		filepath.Join(c.Dir, "cni", "net.d", "10-tuna-node.conflist"): c.cniConfig(),
		filepath.Join(c.Dir, "kubelet", "config.yaml"):                c.kubeletConfig(),
		filepath.Join(c.Dir, "kube-proxy", "config.yaml"):             c.kubeProxyConfig(kc["kube-proxy"]),
		filepath.Join(c.Dir, "resolv.conf"):                           "options ndots:1\n",
	}
	if err := writeFiles(files); err != nil {
		return err
	}
	// The pods mount the kubelet's root: it lets others traverse it.
	if err := os.Chmod(c.Dir, 0o755); err != nil {
		return err
	}

	bin := func(name string) string { return filepath.Join(c.Tools, name) }
	c.add(Etcd, bin("etcd"),
		"--name=node", "--data-dir="+filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=node=http://127.0.0.1:2380",
		// Test data: losing it on a power cut costs nothing, and fsync is
		// slow on a busy shared disk.
		"--unsafe-no-fsync=true")
	apiArgs := []string{
		"--etcd-servers=http://127.0.0.1:2379",
		"--advertise-address=" + node, "--bind-address=0.0.0.0", "--secure-port=" + strconv.Itoa(apiServerPort),
		"--service-cluster-ip-range=" + c.Net.ServiceCIDR.String(),
		"--tls-cert-file=" + p.path("apiserver.crt"), "--tls-private-key-file=" + p.path("apiserver.key"),
		"--client-ca-file=" + p.path("ca.crt"),
		"--kubelet-client-certificate=" + p.path("apiserver-kubelet-client.crt"), "--kubelet-client-key=" + p.path("apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority=" + p.path("ca.crt"),
		// The node's address, not its name (no DNS here): logs, exec and
		// port-forward dial it.
		"--kubelet-preferred-address-types=InternalIP",
		"--authorization-mode=Node,RBAC",
		// The default admission plugins (PodSecurity and ServiceAccount
		// among them) and the kubelet's restriction to its own node.
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.path("sa.pub"), "--service-account-signing-key-file=" + p.path("sa.key"),
		"--profiling=false",
	}
	c.add(APIServer, append(append([]string{bin("kube-apiserver")}, apiArgs...), c.opts.APIServerArgs...)...)
	// The controller-manager makes the service accounts, their tokens' root
	// CA ConfigMap (kube-root-ca.crt), the ReplicaSets and Pods of
	// Deployments and the EndpointSlices kube-proxy routes by.
	c.add(ControllerManager, bin("kube-controller-manager"),
		"--kubeconfig="+kc["kube-controller-manager"], "--authentication-kubeconfig="+kc["kube-controller-manager"],
		"--authorization-kubeconfig="+kc["kube-controller-manager"],
		"--bind-address=127.0.0.1", "--leader-elect=false", "--use-service-account-credentials=true",
		"--service-account-private-key-file="+p.path("sa.key"), "--root-ca-file="+p.path("ca.crt"),
		"--cluster-signing-cert-file="+p.path("ca.crt"), "--cluster-signing-key-file="+p.path("ca.key"),
		"--controllers=*", "--profiling=false")
	c.add(Scheduler, bin("kube-scheduler"),
		"--kubeconfig="+kc["kube-scheduler"], "--authentication-kubeconfig="+kc["kube-scheduler"],
		"--authorization-kubeconfig="+kc["kube-scheduler"],
		"--bind-address=127.0.0.1", "--leader-elect=false", "--profiling=false")
	c.add(Containerd, "containerd", "--config="+filepath.Join(c.Dir, "containerd", "config.toml"))
	c.add(Kubelet, bin("kubelet"),
		"--config="+filepath.Join(c.Dir, "kubelet", "config.yaml"), "--kubeconfig="+kc["kubelet"],
		"--root-dir="+filepath.Join(c.Dir, "kubelet", "root"), "--hostname-override="+NodeName, "--node-ip="+node,
		"--v=1")
	c.add(KubeProxy, bin("kube-proxy"), "--config="+filepath.Join(c.Dir, "kube-proxy", "config.yaml"))
	return nil
}

func (c *Cluster) add(name string, argv ...string) {
	c.procs[name] = &process{name: name, argv: argv, log: filepath.Join(c.opts.LogDir, name+".log")}
	c.order = append(c.order, name)
}

// componentTimeout bounds each component's start, generous for two busy
// cores.
const componentTimeout = 3 * time.Minute

// awaitComponent waits until name serves, or fails when it exits.
func (c *Cluster) awaitComponent(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, componentTimeout)
	defer cancel()
	p := c.procs[name]
	check := c.readiness(name)
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.exited():
			return fmt.Errorf("%s exited at start; its log is %s", name, p.log)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %v: %w; its log is %s", name, componentTimeout, err, p.log)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// readiness is how a component shows it serves.
func (c *Cluster) readiness(name string) func(context.Context) error {
	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext:     c.Net.DialContext,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // health ports of the node's own components, on its loopback
	}}
	get := func(url string) func(context.Context) error {
		return func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			resp, err := insecure.Do(req)
			if err != nil {
				return err
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s", url, resp.Status)
			}
			return nil
		}
	}
	switch name {
	case Etcd:
		return get("http://127.0.0.1:2379/health")
	case APIServer:
		return func(ctx context.Context) error {
			_, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			return err
		}
	case ControllerManager:
		return get("https://127.0.0.1:10257/healthz")
	case Scheduler:
		return get("https://127.0.0.1:10259/healthz")
	case Containerd:
		return func(context.Context) error {
			conn, err := net.Dial("unix", c.containerdSocket())
			if err == nil {
				_ = conn.Close()
			}
			return err
		}
	case Kubelet:
		return get("http://127.0.0.1:10248/healthz")
	case KubeProxy:
		return get("http://127.0.0.1:10256/healthz")
	}
	return func(context.Context) error { return nil }
}

// awaitNode waits until the node is Ready and the controller-manager has
// made the default service account and the root CA ConfigMap that every
// pod's token volume needs.
func (c *Cluster) awaitNode(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, componentTimeout)
	defer cancel()
	var last error
	for {
		last = c.nodeReady(ctx)
		if last == nil {
			_, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
			if err == nil {
				_, err = c.Client.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			}
			if last = err; err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the node is not ready within %v: %w", componentTimeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *Cluster) nodeReady(ctx context.Context) error {
	n, err := c.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return errors.New("the kubelet has not registered the node yet")
	}
	if err != nil {
		return err
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			if cond.Status == corev1.ConditionTrue {
				return nil
			}
			return fmt.Errorf("node %s: Ready=%s %s: %s", NodeName, cond.Status, cond.Reason, cond.Message)
		}
	}
	return fmt.Errorf("node %s has no Ready condition", NodeName)
}

// NodeReady reports whether the node's Ready condition is True.
func (c *Cluster) NodeReady(ctx context.Context) error { return c.nodeReady(ctx) }

// CACertPool is the cluster CA's pool (the apiserver's and the kubelet's
// serving certificates).
func (c *Cluster) CACertPool() (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	data, err := os.ReadFile(c.pki.path("ca.crt"))
	if err != nil {
		return nil, err
	}
	pool.AppendCertsFromPEM(data)
	return pool, nil
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}
