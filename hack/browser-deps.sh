#!/usr/bin/env bash
# Installs what the browser tests run besides Go: Debian's headless
# Chromium (package chromium), with apt-get, only when it is missing. The
# tests drive it with chromedp (go.mod) and find it at /usr/bin/chromium.
# Needs root (or sudo) and a Debian or Ubuntu host.
#
# Usage: hack/browser-deps.sh
set -euo pipefail
if command -v chromium >/dev/null; then
	echo "browser-deps: chromium is installed"
	exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || { echo "browser-deps: run as root to install chromium" >&2; exit 1; }
	sudo=sudo
fi
echo "browser-deps: installing chromium"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends chromium fonts-dejavu-core
