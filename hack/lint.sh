#!/usr/bin/env bash
# Lints the project: actionlint on every workflow in .github/workflows, then
# golangci-lint (.golangci.yml) on the product's module, the root go.mod,
# which holds every package of the operator, the edge, the CLI, the chart
# and the tests.
#
# Not linted: the tools modules under tests/tools (they only build pinned
# third-party programs, kube-apiserver, etcd, pebble and Prometheus, from
# a few lines of main; linting them would type-check all of Kubernetes)
# and hack/tools (pins, no code).
#
# Both linters are pinned as `tool`s of their own modules under hack/tools/lint
# (two modules: they need different releases of a YAML library), so the
# product's go.mod does not carry them. They are built once into the
# git-ignored .cache/lint/ and rebuilt only when their pins change.
#
# Usage: hack/lint.sh [golangci-lint run flags...]
#   LINT_CONCURRENCY (default 2): golangci-lint's --concurrency.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bin=$root/.cache/lint
mkdir -p "$bin"

# build NAME PACKAGE: builds the tool of hack/tools/lint/NAME unless the
# binary in .cache/lint was built from the same go.mod and go.sum.
build() {
  local name=$1 pkg=$2 dir=$root/hack/tools/lint/$1 stamp start=$SECONDS
  stamp=$(cat "$dir/go.mod" "$dir/go.sum" | sha256sum | cut -c1-16)
  if [[ -x $bin/$name && "$(cat "$bin/$name.stamp" 2>/dev/null)" == "$stamp" ]]; then
    return
  fi
  echo "lint: building $name (pinned in hack/tools/lint/$name/go.mod; once, then cached in .cache/lint)" >&2
  (cd "$dir" && go build -o "$bin/$name.tmp" "$pkg")
  mv "$bin/$name.tmp" "$bin/$name"
  echo "$stamp" > "$bin/$name.stamp"
  echo "lint: $name built in $((SECONDS - start))s" >&2
}
build actionlint github.com/rhysd/actionlint/cmd/actionlint
build golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint

echo "lint: actionlint $("$bin/actionlint" -version | head -1) on .github/workflows" >&2
"$bin/actionlint" .github/workflows/*.yml

echo "lint: golangci-lint $("$bin/golangci-lint" version --short 2>/dev/null || true) on ./..." >&2
"$bin/golangci-lint" run --concurrency "${LINT_CONCURRENCY:-2}" "$@" ./...
echo "lint: passed" >&2
