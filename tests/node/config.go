package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The settings below are each there for a reason this machine showed; the
// comment beside each says which.

// containerdConfig is containerd 1.6's configuration (version 2): its own
// socket, state and root under the cluster's folder, CRI with runc and
// cgroupfs, the CNI bridge, and the harness's own pause image.
func (c *Cluster) containerdConfig() string {
	d := filepath.Join(c.Dir, "containerd")
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  # Root here lacks CAP_SYS_RESOURCE: without this, runc fails to set the
  # sandbox's oom_score_adj below the runtime's own.
  restrict_oom_score_adj = true
  # The pods' network namespaces go under the cluster's folder, not
  # /var/run/netns, so that a sweep finds them.
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q
`, filepath.Join(d, "root"), filepath.Join(d, "state"), c.containerdSocket(), filepath.Join(d, "containerd.ttrpc.sock"),
		filepath.Join(d, "opt"), PauseImage, cniBinDir, filepath.Join(c.Dir, "cni", "net.d"))
}

// cniBinDir is where Debian's containernetworking-plugins installs them.
const cniBinDir = "/usr/lib/cni"

func (c *Cluster) containerdSocket() string {
	return filepath.Join(c.Dir, "containerd", "containerd.sock")
}

// cniConfig is the pods' network: a bridge with the pod range, masqueraded
// when it leaves the node (the host has no route back to pods of its
// own), and host ports.
func (c *Cluster) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %[1]q,
  "plugins": [
    {
      "type": "bridge",
      "bridge": %[2]q,
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %[3]q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %[4]q
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, networkName(c.Index), c.Net.Bridge, c.Net.PodCIDR.String(), filepath.Join(c.Dir, "cni", "ipam"))
}

// kubeletConfig is the KubeletConfiguration.
func (c *Cluster) kubeletConfig() string {
	p := c.pki
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroups here are v1, which the kubelet refuses unless told.
failCgroupV1: false
# containerd 1.6 lacks the CRI RuntimeConfig call that tells the kubelet
# the driver; the kubelet falls back to this (a fallback it plans to drop
# in 1.38: containerd 2 then).
cgroupDriver: cgroupfs
# Created in every hierarchy by the harness, which removes it after.
cgroupRoot: %[1]q
containerRuntimeEndpoint: unix://%[2]s
podLogsDir: %[3]q
address: %[4]q
tlsCertFile: %[5]q
tlsPrivateKeyFile: %[6]q
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %[7]q
authorization:
  mode: Webhook
failSwapOn: false
# No cluster DNS: the product dials ClusterIPs and IP addresses.
resolvConf: %[8]q
# The host's disk is shared with everything else on the machine, and its
# free share is no sign of this node's health: a build cache that grew
# took it under 2 %% once, the node was tainted disk-pressure and no pod
# was scheduled. As kind does, never evict for disk (a full disk fails
# writes with an error that says so instead).
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "0%%"
  nodefs.inodesFree: "0%%"
  imagefs.available: "0%%"
  imagefs.inodesFree: "0%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# No pulls ever: images are imported, the pause image too.
serializeImagePulls: false
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
staticPodPath: ""
`, "/"+cgroupName(c.Index), c.containerdSocket(), filepath.Join(c.Dir, "pod-logs"), c.Net.NodeIP.String(),
		p.path("kubelet-server.crt"), p.path("kubelet-server.key"), p.path("ca.crt"), filepath.Join(c.Dir, "resolv.conf"))
}

// kubeProxyConfig is kube-proxy's configuration: iptables mode, so that
// pods reach ClusterIPs (the apiserver's first of all), without touching
// the host's conntrack settings.
func (c *Cluster) kubeProxyConfig(kubeconfig string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %[1]q
hostnameOverride: %[2]q
clusterCIDR: %[3]q
bindAddress: %[4]q
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, NodeName, c.Net.PodCIDR.String(), c.Net.NodeIP.String())
}

func writeFiles(files map[string]string) error {
	for name, content := range files {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(name, []byte(strings.TrimLeft(content, "\n")), 0o600); err != nil {
			return err
		}
	}
	return nil
}
