#!/usr/bin/env bash
# Builds the real kube-apiserver and etcd that the tests run against (and
# kubectl, for the demo and for tests of what `kubectl explain` shows), into a
# git-ignored cache. It rebuilds only when what the binaries are made of
# changes (this module's go.mod/go.sum, etcd's main, the build flags), and
# prints progress, because a cold build takes over 11 minutes on two cores.
#
# Usage: tests/tools/build.sh [cache-dir]    (default: <repo>/.cache/bin)
# Prints the cache directory on its last line.
#
# TUNA_TOOLS names the binaries to make sure of (default: kube-apiserver, etcd
# and kubectl). The demo asks for kube-apiserver and etcd only, so a
# first-time user's URL does not wait for kubectl; the node suite (tests/node)
# adds the node components: kubelet, kube-proxy, kube-scheduler and
# kube-controller-manager (about 10 more minutes cold on two cores). Each
# binary has its own stamp, so a later run builds only what is missing.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-${TUNA_TOOLS_CACHE:-$root/.cache/bin}}
mkdir -p "$out"

k8s_version=v1.37.2
# -dwarf=false: the linker strips DWARF anyway (-s -w), so the compiler
# need not make it: about 2 % less CPU over kube-apiserver's packages.
optimised_gcflags=all=-dwarf=false
# TUNA_TOOLS_UNOPTIMIZED=1 (the demo, into a folder of its own): no
# optimisation and no inlining (-N -l), a quarter less compiler CPU on a
# first-time user's way to the URL, for a kube-apiserver that needs about
# twice the CPU; the tests keep the optimised build (docs/benchmarks.md,
# "The newcomer path"). When the optimised tools asked for are cached
# already (the tests built them), those are the answer: nothing compiles.
gcflags=$optimised_gcflags
if [[ ${TUNA_TOOLS_UNOPTIMIZED:-} == 1 ]]; then gcflags="all=-N -l -dwarf=false"; fi
ldflags="-s -w"
ldflags+=" -X k8s.io/component-base/version.gitVersion=$k8s_version"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
ldflags+=" -X k8s.io/component-base/version.gitMinor=37"
ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
ldflags+=" -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"
ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$k8s_version"
buildflags=(-trimpath "-gcflags=$gcflags" -ldflags "$ldflags")
# The stamp is what the binaries are made of: the pins, etcd's main and the
# flags (not the rest of this script, so a change to its progress output or
# its order of work rebuilds nothing).
stamp_of() {
  { cat "$here/go.mod" "$here/go.sum" "$here/cmd/etcd/main.go"; echo "$*"; } | sha256sum | cut -c1-16
}
stamp=$(stamp_of "${buildflags[*]}")
declare -A package=(
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [etcd]=./cmd/etcd
  [kubectl]=k8s.io/kubernetes/cmd/kubectl
  [kubelet]=k8s.io/kubernetes/cmd/kubelet
  [kube-proxy]=k8s.io/kubernetes/cmd/kube-proxy
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
)
read -r -a want <<< "${TUNA_TOOLS:-kube-apiserver etcd kubectl}"
for name in "${want[@]}"; do
  [[ -n ${package[$name]:-} ]] || { echo "tools: TUNA_TOOLS names $name; the tools are ${!package[*]}" >&2; exit 2; }
done
# missing_in dir stamp: the tools of want that dir lacks, or holds with another stamp.
missing_in() {
  local name
  for name in "${want[@]}"; do
    [[ -x $1/$name && "$(cat "$1/.stamp.$name" 2>/dev/null)" == "$2" ]] || echo "$name"
  done
}
optimised=$root/.cache/bin
if [[ $gcflags != "$optimised_gcflags" && $out != "$optimised" ]] &&
  [[ -z $(missing_in "$optimised" "$(stamp_of "${buildflags[*]/#-gcflags=*/-gcflags=$optimised_gcflags}")") ]]; then
  echo "tools: ${want[*]} ($k8s_version, optimised) cached in $optimised" >&2
  echo "$optimised"
  exit 0
fi
mapfile -t missing < <(missing_in "$out" "$stamp")
if (( ${#missing[@]} == 0 )); then
  echo "tools: ${want[*]} ($k8s_version) cached in $out" >&2
  echo "$out"
  exit 0
fi

cd "$here"
# One `go build` for every missing tool: the packages they share (etcd's
# client, apimachinery, client-go) compile once, both cores stay busy while
# one binary links, and the link steps run side by side.
pkgs=()
for name in "${missing[@]}"; do pkgs+=("${package[$name]}"); done
start=$SECONDS n=0 last=0
total=$(go list -deps "${pkgs[@]}" | wc -l)
echo "tools: building ${missing[*]} ($total packages; the first build takes minutes)" >&2
tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# go build -v names each package as it compiles it: count them for progress.
go build -v "${buildflags[@]}" -o "$tmp/" "${pkgs[@]}" 2>&1 |
  while IFS= read -r line; do
    if [[ $line == *" "* || $line == *":"* ]]; then echo "$line" >&2; continue; fi
    n=$((n + 1))
    if (( SECONDS - last >= 10 )); then
      last=$SECONDS
      echo "tools:   $n/$total packages compiled, $((SECONDS - start))s" >&2
    fi
  done
[[ ${PIPESTATUS[0]} -eq 0 ]] || { echo "tools: building ${missing[*]} failed" >&2; exit 1; }
# Each binary is named after its package's last element, as the tools are.
for name in "${missing[@]}"; do
  mv "$tmp/$name" "$out/$name"
  echo "$stamp" > "$out/.stamp.$name"
done
echo "tools: ${missing[*]} built in $((SECONDS - start))s" >&2
echo "$out"
