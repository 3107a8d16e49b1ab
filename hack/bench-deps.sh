#!/usr/bin/env bash
# Installs what the transport benchmark (go tool task bench:transport) runs
# besides Go: wrk (required), nginx (its reference row) and PostgreSQL 15
# with pgbench (its pgbench rows), with apt-get, only those missing.
# Needs root (or sudo) and a Debian or Ubuntu host.
#
# Usage: hack/bench-deps.sh
set -euo pipefail
missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v nginx >/dev/null || missing+=(nginx)
command -v pgbench >/dev/null && [ -x /usr/lib/postgresql/15/bin/initdb ] || missing+=(postgresql-15 postgresql-contrib)
if [ ${#missing[@]} -eq 0 ]; then
	echo "bench-deps: wrk, nginx and PostgreSQL 15 are installed"
	exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || { echo "bench-deps: run as root to install ${missing[*]}" >&2; exit 1; }
	sudo=sudo
fi
echo "bench-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}"
# The Debian package starts nginx on port 80; the benchmark runs its own.
if command -v systemctl >/dev/null && systemctl is-active --quiet nginx 2>/dev/null; then
	$sudo systemctl disable --now nginx || true
fi
