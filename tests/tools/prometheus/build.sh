#!/usr/bin/env bash
# Builds the real Prometheus server (cmd/prometheus of the pinned
# github.com/prometheus/prometheus module) into a git-ignored cache, for the
# tests that scrape the live components and evaluate the dashboards' queries
# and the alert rules with it (tests/observability). It rebuilds only when
# the pins change (this module's go.mod/go.sum or this script), and prints
# progress, because a cold build takes minutes on two cores.
#
# The build tag remove_all_sd leaves out the cloud service discoveries
# (AWS, Azure, GCE, Kubernetes, ...): the tests use static targets, and
# those SDKs would make the build about half as big again. The server is
# otherwise Prometheus' own: scrape loop, TSDB, PromQL engine, rule manager
# and HTTP API. The web UI's assets are not embedded (no builtinassets tag).
#
# Usage: tests/tools/prometheus/build.sh [cache-dir]
#   (default: $TUNA_PROMETHEUS_CACHE, else <repo>/.cache/prometheus)
# Prints the path of the binary on its last line.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${1:-${TUNA_PROMETHEUS_CACHE:-$root/.cache/prometheus}}
mkdir -p "$out"

pkg=github.com/prometheus/prometheus/cmd/prometheus
tags=remove_all_sd
stamp=$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -c1-16)
if [[ -x $out/prometheus && "$(cat "$out/.stamp" 2>/dev/null)" == "$stamp" ]]; then
  echo "tools: prometheus is cached in $out" >&2
  echo "$out/prometheus"
  exit 0
fi

cd "$here"
version=$(go list -m -f '{{.Version}}' github.com/prometheus/prometheus)
ldflags="-s -w -X github.com/prometheus/common/version.Version=$version"
ldflags+=" -X github.com/prometheus/common/version.Branch=pinned"
ldflags+=" -X github.com/prometheus/common/version.BuildDate=19700101-00:00:00"
start=$SECONDS n=0 last=0
total=$(go list -tags "$tags" -deps "$pkg" | wc -l)
echo "tools: building prometheus $version ($total packages; the first build takes minutes)" >&2
# go build -v names each package as it compiles it: count them for progress.
go build -v -trimpath -tags "$tags" -ldflags "$ldflags" -o "$out/prometheus.tmp" "$pkg" 2>&1 |
  while IFS= read -r line; do
    if [[ $line == *" "* || $line == *":"* ]]; then echo "$line" >&2; continue; fi
    n=$((n + 1))
    if (( SECONDS - last >= 10 )); then
      last=$SECONDS
      echo "tools:   prometheus: $n/$total packages compiled, $((SECONDS - start))s" >&2
    fi
  done
[[ ${PIPESTATUS[0]} -eq 0 ]] || { echo "tools: building prometheus failed" >&2; exit 1; }
mv "$out/prometheus.tmp" "$out/prometheus"
echo "$stamp" > "$out/.stamp"
echo "tools: prometheus built in $((SECONDS - start))s" >&2
echo "$out/prometheus"
