package harness

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	edgeclient "code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/tests/etcdcluster"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// EdgeCluster is several tuna-edge nodes, each its own process of the
// shipped binary, on one real etcd cluster: they can be killed (SIGKILL),
// stopped and started again like the machines of a real cluster.
type EdgeCluster struct {
	Etcd *etcdcluster.Cluster
	// Keys holds what every node shares: host key, secrets key, API
	// certificate.
	Keys  string
	Nodes []*EdgeNode
	// OperatorKey (tunnels:write, secrets:read) and AdminKey (full), made
	// with `tuna-edge keys create --etcd-endpoints`.
	OperatorKey, AdminKey string
	// Trust pins the API certificate every node presents.
	Trust edgeclient.Trust

	bin string
	// What AddNode needs to make another node like the first ones.
	dir, endpoints string
	tcp            int
	opts           EdgeClusterOptions
}

// EdgeNode is one node's process and addresses.
type EdgeNode struct {
	Name                      string
	APIURL, SSHAddr, HTTPAddr string
	TCPHost                   string
	args                      []string
	log                       string
	mu                        sync.Mutex
	cmd                       *exec.Cmd
	done                      chan struct{}
}

// EdgeClusterOptions tune a cluster; zero values are fine.
type EdgeClusterOptions struct {
	// Keepalive tunes the transport for fast failure detection.
	KeepaliveInterval, KeepaliveTimeout time.Duration
	// NodeTTL is the lease of each node's record (default 2s).
	NodeTTL time.Duration
	// APIRateLimit and APIRateBurst override the per-key API rate.
	APIRateLimit float64
	APIRateBurst int
}

// BuildEdge builds the tuna-edge binary into dir.
func BuildEdge(dir string) (string, error) {
	bin := filepath.Join(dir, "tuna-edge")
	cmd := exec.Command("go", "build", "-o", bin, "./edge/cmd/tuna-edge")
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building tuna-edge: %w\n%s", err, out)
	}
	return bin, nil
}

// BuildEdgeAt builds tuna-edge as it was at the git revision rev (a
// commit, tag or branch of this repository) into dir, from that
// revision's tree exported to dir/src-<rev>: a benchmark's reference,
// measured in the same run as the working tree's edge.
func BuildEdgeAt(dir, rev string) (string, error) {
	src := filepath.Join(dir, "src-"+strings.NewReplacer("/", "-", ".", "-").Replace(rev))
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	export := exec.Command("sh", "-c", `git archive --format=tar "$1" | tar -x -C "$2"`, "export", rev, src)
	export.Dir = RepoRoot()
	if out, err := export.CombinedOutput(); err != nil {
		return "", fmt.Errorf("exporting revision %s: %w\n%s", rev, err, out)
	}
	bin := filepath.Join(dir, "tuna-edge-"+filepath.Base(src))
	build := exec.Command("go", "build", "-o", bin, "./edge/cmd/tuna-edge")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building tuna-edge at %s: %w\n%s", rev, err, out)
	}
	return bin, nil
}

// StartEdgeCluster starts a three-member etcd and n edge nodes in dir.
// Node i's TCP endpoints listen on 127.0.0.(i+2), so every node can hold
// a reserved port, as separate machines do.
func StartEdgeCluster(dir string, n int, o EdgeClusterOptions) (*EdgeCluster, error) {
	bin, err := BuildEdge(dir)
	if err != nil {
		return nil, err
	}
	ec, err := etcdcluster.Start(filepath.Join(dir, "etcd"), 3)
	if err != nil {
		return nil, err
	}
	c := &EdgeCluster{Etcd: ec, bin: bin, Keys: filepath.Join(dir, "keys"), dir: dir}
	fail := func(err error) (*EdgeCluster, error) { c.Close(); return nil, err }
	if out, err := exec.Command(bin, "cluster-keys", "--out", c.Keys).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("tuna-edge cluster-keys: %w\n%s", err, out))
	}
	der, err := writeAPICert(c.Keys)
	if err != nil {
		return fail(err)
	}
	c.Trust = edgeclient.Trust{Fingerprint: apiwire.Fingerprint(der)}
	endpoints := strings.Join(ec.Endpoints(), ",")
	for _, k := range []struct {
		dst    *string
		name   string
		scopes string
	}{{&c.OperatorKey, "tuna-operator", "tunnels:write,secrets:read"}, {&c.AdminKey, "admin", "full"}} {
		out, err := exec.Command(bin, "keys", "create", "--name", k.name, "--scope", k.scopes, "--etcd-endpoints", endpoints).Output()
		if err != nil {
			return fail(fmt.Errorf("tuna-edge keys create: %w", err))
		}
		*k.dst = strings.TrimSpace(string(out))
	}
	tcp, err := ports.Take(tcpPorts)
	if err != nil {
		return fail(err)
	}
	if o.NodeTTL == 0 {
		o.NodeTTL = 2 * time.Second
	}
	c.endpoints, c.tcp, c.opts = endpoints, tcp, o
	for range n {
		if _, err := c.AddNode(); err != nil {
			return fail(err)
		}
	}
	return c, nil
}

// AddNode starts one more node, edge-<n>, on the cluster's etcd with the
// cluster's keys, as a machine joining it, and returns its index.
func (c *EdgeCluster) AddNode() (int, error) {
	i, err := c.NewNode()
	if err != nil {
		return 0, err
	}
	return i, c.Start(i)
}

// NewNode makes one more node like the others without starting it (Start
// does), so a caller knows its addresses before it runs.
func (c *EdgeCluster) NewNode() (int, error) {
	i := len(c.Nodes)
	node, err := c.newNode(filepath.Join(c.dir, "node-"+strconv.Itoa(i)), i, c.tcp, c.endpoints, c.opts)
	if err != nil {
		return 0, err
	}
	c.Nodes = append(c.Nodes, node)
	return i, nil
}

func (c *EdgeCluster) newNode(dir string, i, tcp int, endpoints string, o EdgeClusterOptions) (*EdgeNode, error) {
	addrs := make([]string, 3)
	for j := range addrs {
		a, err := ports.TakeAddr()
		if err != nil {
			return nil, err
		}
		addrs[j] = a
	}
	n := &EdgeNode{
		Name: "edge-" + strconv.Itoa(i), APIURL: "https://" + addrs[0], SSHAddr: addrs[1], HTTPAddr: addrs[2],
		TCPHost: "127.0.0." + strconv.Itoa(i+2), log: dir + ".log",
	}
	n.args = []string{"serve",
		"--data-dir", dir, "--base-domain", BaseDomain, "--node-name", n.Name,
		"--api-listen", addrs[0], "--ssh-listen", addrs[1], "--http-listen", addrs[2],
		"--tcp-listen-host", n.TCPHost, "--public-tcp-host", n.TCPHost,
		"--tcp-port-range", fmt.Sprintf("%d-%d", tcp, tcp+tcpPorts-1),
		"--etcd-endpoints", endpoints, "--node-ttl", o.NodeTTL.String(),
		"--host-key-file", filepath.Join(c.Keys, "ssh_host_ed25519_key"),
		"--secrets-key-file", filepath.Join(c.Keys, "secrets.key"),
		"--api-tls-cert", filepath.Join(c.Keys, "api.crt"), "--api-tls-key", filepath.Join(c.Keys, "api.key"),
		"--dns-resolver", "",
	}
	if o.KeepaliveInterval > 0 {
		n.args = append(n.args, "--keepalive-interval", o.KeepaliveInterval.String(), "--keepalive-timeout", o.KeepaliveTimeout.String())
	}
	if o.APIRateLimit > 0 {
		n.args = append(n.args, "--api-rate-limit", fmt.Sprint(o.APIRateLimit), "--api-rate-burst", strconv.Itoa(o.APIRateBurst))
	}
	return n, nil
}

// Client is an API client of node i with key.
func (c *EdgeCluster) Client(i int, key string) *edgeclient.Client {
	return edgeclient.New(c.Nodes[i].APIURL, key, edgeclient.WithTrust(c.Trust))
}

// Start starts node i (again, after Kill or Stop) and waits until its API
// answers.
func (c *EdgeCluster) Start(i int) error {
	n := c.Nodes[i]
	log, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.bin, n.args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("starting %s: %w", n.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = log.Close(); close(done) }()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	api := c.Client(i, c.AdminKey)
	for {
		if _, err := api.WhoAmI(ctx); err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited at start; its log is %s", n.Name, n.log)
		case <-ctx.Done():
			return fmt.Errorf("%s did not serve its API within a minute; its log is %s", n.Name, n.log)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// PID is node i's process id (0 before it starts).
func (c *EdgeCluster) PID(i int) int {
	n := c.Nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Kill ends node i with SIGKILL, as a crashed machine: no agent is told,
// its record stays until its lease expires.
func (c *EdgeCluster) Kill(i int) { c.signal(i, syscall.SIGKILL) }

// Stop ends node i with SIGTERM, as systemd does: agents are told it shuts
// down and its record goes at once.
func (c *EdgeCluster) Stop(i int) { c.signal(i, syscall.SIGTERM) }

func (c *EdgeCluster) signal(i int, sig syscall.Signal) {
	n := c.Nodes[i]
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Close stops every node and the etcd cluster.
func (c *EdgeCluster) Close() {
	for i := range c.Nodes {
		c.Kill(i)
	}
	if c.Etcd != nil {
		c.Etcd.Close()
	}
}

// writeAPICert writes the API certificate every node presents, for the
// loopback address, and returns its DER.
func writeAPICert(dir string) ([]byte, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tuna-edge cluster API"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		return nil, err
	}
	err = errors.Join(
		os.WriteFile(filepath.Join(dir, "api.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600),
		os.WriteFile(filepath.Join(dir, "api.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return der, err
}
