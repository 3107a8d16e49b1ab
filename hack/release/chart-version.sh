#!/usr/bin/env bash
# Sets the chart's version and appVersion to a release's version (from the
# tag, without its "v"), so that the packaged chart, the chart the
# tuna-operator CLI embeds and the image tag it defaults to (appVersion)
# all name the release. The release workflow runs it on its checkout; the
# committed Chart.yaml keeps the development version.
#
# Usage: hack/release/chart-version.sh 1.2.3
set -euo pipefail
version=${1:?usage: chart-version.sh VERSION (without the v)}
if [[ ! $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "chart-version: $version is not a SemVer version such as 1.2.3 or 1.2.3-rc.1" >&2
  exit 1
fi
chart=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/chart/tuna-k8s-operator/Chart.yaml
sed -i.bak -E "s/^version: .*/version: $version/; s/^appVersion: .*/appVersion: \"$version\"/" "$chart"
rm -f "$chart.bak"
if ! grep -q "^version: $version\$" "$chart" || ! grep -q "^appVersion: \"$version\"\$" "$chart"; then
  echo "chart-version: $chart has no version/appVersion line to set" >&2
  exit 1
fi
