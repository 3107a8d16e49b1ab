#!/usr/bin/env bash
# Installs what the transport benchmark (go tool task bench:transport) runs
# besides Go: wrk (required), h2load (nghttp2-client, its HTTP/2 rows),
# nginx (its reference rows) and PostgreSQL 15 with pgbench (its pgbench
# rows), with apt-get, only those missing.
# Needs root (or sudo) and a Debian or Ubuntu host.
#
# Usage: hack/bench-deps.sh
set -euo pipefail
missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v nginx >/dev/null || missing+=(nginx)
command -v h2load >/dev/null || missing+=(nghttp2-client)
command -v pgbench >/dev/null && [ -x /usr/lib/postgresql/15/bin/initdb ] || missing+=(postgresql-15 postgresql-contrib)
if [ ${#missing[@]} -eq 0 ]; then
	echo "bench-deps: wrk, h2load, nginx and PostgreSQL 15 are installed"
	exit 0
fi
bash "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" bench-deps "${missing[@]}"
# The Debian package starts nginx on port 80; the benchmark runs its own.
if command -v systemctl >/dev/null && systemctl is-active --quiet nginx 2>/dev/null; then
	systemctl disable --now nginx || sudo systemctl disable --now nginx || true
fi
