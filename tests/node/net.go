package node

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Network is a cluster's addressing, all in 198.18.0.0/15 (RFC 2544's
// range for network tests), four /24s per cluster index: the link between
// the host and the node, the pods, the Services and the load balancers.
type Network struct {
	// HostIP is the host's end of the link: what the node reaches the host
	// (an edge "on a VPS") at. NodeIP is the node's end: the kubelet's
	// InternalIP and the apiserver's address.
	HostIP, NodeIP netip.Addr
	// PodCIDR holds the pods' addresses (a bridge in the node), ServiceCIDR
	// the ClusterIPs.
	PodCIDR, ServiceCIDR netip.Prefix
	// NetNS is the bind mount of the node's network namespace: run a
	// command in it with `nsenter --net=<NetNS>` (not `ip netns exec`,
	// which remounts /sys and hides the cgroup mounts).
	NetNS string
	// Bridge is the pods' bridge in the node.
	Bridge string
}

func networkFor(index int, dir string) Network {
	third := func(k int) [4]byte { return [4]byte{198, 18, byte(4*index + k), 0} }
	link := third(0)
	return Network{
		HostIP:      netip.AddrFrom4([4]byte{link[0], link[1], link[2], 1}),
		NodeIP:      netip.AddrFrom4([4]byte{link[0], link[1], link[2], 2}),
		PodCIDR:     netip.PrefixFrom(netip.AddrFrom4(third(1)), 24),
		ServiceCIDR: netip.PrefixFrom(netip.AddrFrom4(third(2)), 24),
		NetNS:       filepath.Join(dir, "netns"),
		Bridge:      "tnode" + strconv.Itoa(index) + "b",
	}
}

// APIServerServiceIP is the ClusterIP of the kubernetes Service: the
// service range's first address.
func (n Network) APIServerServiceIP() netip.Addr { return n.ServiceCIDR.Addr().Next() }

// setUp makes the namespace, the veth pair and the routes: the host
// reaches pods and ClusterIPs through the node, the node reaches anything
// else through the host.
func (n Network) setUp(index int) error {
	if err := os.WriteFile(n.NetNS, nil, 0o600); err != nil {
		return err
	}
	if out, err := exec.Command("unshare", "--net="+n.NetNS, "true").CombinedOutput(); err != nil {
		return fmt.Errorf("unshare --net=%s: %w: %s", n.NetNS, err, out)
	}
	host, nodeIf := hostVeth(index), "eth0"
	steps := [][]string{
		n.in("ip", "link", "add", nodeIf, "type", "veth", "peer", "name", host, "netns", strconv.Itoa(os.Getpid())),
		{"ip", "addr", "add", n.HostIP.String() + "/24", "dev", host},
		{"ip", "link", "set", host, "up"},
		n.in("ip", "link", "set", "lo", "up"),
		n.in("ip", "addr", "add", n.NodeIP.String()+"/24", "dev", nodeIf),
		n.in("ip", "link", "set", nodeIf, "up"),
		n.in("ip", "route", "add", "default", "via", n.HostIP.String()),
		{"ip", "route", "add", n.PodCIDR.String(), "via", n.NodeIP.String(), "dev", host},
		{"ip", "route", "add", n.ServiceCIDR.String(), "via", n.NodeIP.String(), "dev", host},
		// The node routes between its bridge and the link, and bridged
		// pod traffic passes kube-proxy's iptables rules.
		n.in("sysctl", "-qw", "net.ipv4.ip_forward=1"),
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(s, " "), err, out)
		}
	}
	// Per namespace since Linux 5.3; where the file is missing, the
	// br_netfilter module is not loaded and the bridge plugin loads it.
	_ = exec.Command("nsenter", "--net="+n.NetNS, "sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1").Run()
	return nil
}

// in is argv run in the node's network namespace.
func (n Network) in(argv ...string) []string {
	return append([]string{"nsenter", "--net=" + n.NetNS, "--"}, argv...)
}

// Command is a command run in the node's network namespace (its
// processes see the host's mounts and cgroups).
func (n Network) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	argv := n.in(append([]string{name}, args...)...)
	return exec.CommandContext(ctx, argv[0], argv[1:]...)
}

// DialContext dials from inside the node's network namespace: the
// socket is made there and keeps its namespace, so the test reaches the
// node's loopback listeners (etcd, the kubelet's health port), pod IPs and
// ClusterIPs as a process of the node would. For an http.Transport.
func (n Network) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := n.Do(func() error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// Do runs fn on an OS thread that is in the node's network namespace. It
// runs on a goroutine of its own: should the thread fail to return to the
// host's namespace, the goroutine ends locked to it and Go discards the
// thread rather than reuse it.
func (n Network) Do(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			done <- err
			return
		}
		defer func() { _ = own.Close() }()
		target, err := os.Open(n.NetNS)
		if err != nil {
			done <- err
			return
		}
		defer func() { _ = target.Close() }()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("entering %s: %w", n.NetNS, err)
			return
		}
		fnErr := fn()
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("leaving %s: %w", n.NetNS, err)
			return
		}
		runtime.UnlockOSThread()
		done <- fnErr
	}()
	return <-done
}
