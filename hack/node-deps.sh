#!/usr/bin/env bash
# Installs what the node suite (tests/node) runs besides the Kubernetes
# components the tools module builds: containerd and runc (the container
# runtime), the CNI plugins (bridge, host-local, portmap, loopback) and
# iptables (kube-proxy's mode), with apt-get, only those missing. The node
# harness runs it before it starts anything; it does nothing when all are
# there. Needs root (the node suite runs as root) and a Debian or Ubuntu host.
#
# Usage: hack/node-deps.sh
set -euo pipefail
missing=()
command -v containerd >/dev/null || missing+=(containerd)
command -v runc >/dev/null || missing+=(runc)
[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/portmap ] && [ -x /usr/lib/cni/loopback ] ||
	missing+=(containernetworking-plugins)
command -v iptables >/dev/null || missing+=(iptables)
if [ ${#missing[@]} -eq 0 ]; then
	echo "node-deps: containerd, runc, the CNI plugins and iptables are installed"
	exit 0
fi
bash "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" node-deps "${missing[@]}"
# The Debian package starts containerd as a service where systemd runs; the
# node harness runs its own, with its own socket and state, so leave the
# host's alone but do not depend on it.
