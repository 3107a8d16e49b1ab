#!/usr/bin/env bash
# Installs Debian packages with apt-get, as root or through sudo: the one
# install step of the scripts that bring what a suite runs besides Go
# (hack/bench-deps.sh, hack/node-deps.sh).
#
# Usage: hack/apt-install.sh WHO PACKAGE...   (WHO prefixes the messages)
set -euo pipefail
who=${1:?usage: apt-install.sh WHO PACKAGE...}
shift
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || { echo "$who: run as root to install $*" >&2; exit 1; }
	sudo=sudo
fi
echo "$who: installing $*"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "$@"
