#!/usr/bin/env bash
# Builds what a GitHub release carries, into release/ (git-ignored):
#   - tuna-operator, the CLI, for every platform in PLATFORMS, and tuna-edge
#     for Linux (it runs on a VPS), as .tar.gz (.zip for Windows), stamped
#     with the version, commit and commit date (internal/version);
#   - tuna-k8s-operator-crds.yaml, every CRD in one file, for
#     `kubectl apply --server-side -f`;
#   - SHA256SUMS of all of them.
# Run hack/release/chart-version.sh first, so the CLI embeds the released chart.
#
# Usage: hack/release/build.sh v1.2.3
#   PLATFORMS (default: linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64)
set -euo pipefail
tag=${1:?usage: build.sh TAG (v1.2.3)}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
platforms=${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64}
commit=$(git rev-parse HEAD)
date=$(TZ=UTC git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd HEAD)
pkg=code.tuna.am/tuna/k8s-operator/internal/version
ldflags="-s -w -X $pkg.Version=$tag -X $pkg.Commit=$commit -X $pkg.Date=$date"
out=$root/release
rm -rf "$out"
mkdir -p "$out"

# archive NAME OS ARCH: builds one binary and packs it with the project's
# README.
archive() {
  local name=$1 os=$2 arch=$3 ext="" dir
  [[ $os == windows ]] && ext=.exe
  dir=$(mktemp -d)
  echo "release: $name $os/$arch" >&2
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "$ldflags" -o "$dir/$name$ext" "./${cmd[$name]}"
  cp README.md "$dir/"
  if [[ $os == windows ]]; then
    (cd "$dir" && zip -q "$out/${name}_${tag}_${os}_${arch}.zip" "$name$ext" README.md)
  else
    tar -C "$dir" -czf "$out/${name}_${tag}_${os}_${arch}.tar.gz" "$name$ext" README.md
  fi
  rm -rf "$dir"
}
declare -A cmd=([tuna-operator]=cli/cmd/tuna-operator [tuna-edge]=edge/cmd/tuna-edge)
for p in $platforms; do
  archive tuna-operator "${p%/*}" "${p#*/}"
  [[ ${p%/*} == linux ]] && archive tuna-edge "${p%/*}" "${p#*/}"
done

# controller-gen starts every file with "---": they concatenate as they are.
cat crds/k8s.tuna.am_*.yaml > "$out/tuna-k8s-operator-crds.yaml"

(cd "$out" && sha256sum -- * > SHA256SUMS)
echo "release: $(find "$out" -type f | wc -l) files in $out" >&2
