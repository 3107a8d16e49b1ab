#!/usr/bin/env bash
# Regenerates everything derived from the API types in operator/api/:
#   - operator/api/v1alpha1/zz_generated.deepcopy.go (DeepCopy methods),
#   - crds/k8s.tuna.am_*.yaml (the CustomResourceDefinitions),
#   - chart/tuna-k8s-operator/crds/ (a copy of crds/, which Helm and Nelm
#     install with the chart);
# and the Grafana dashboards (the chart's chart/tuna-k8s-operator/dashboards/,
# the edge's edge/deploy/monitoring/), built as code in internal/dashboards.
#
# controller-gen is pinned by the `tool` directive in go.mod
# (sigs.k8s.io/controller-tools v0.23.0), so `go tool controller-gen` needs no
# other installation. Run from anywhere: hack/generate.sh
#
# Tests (operator/api/v1alpha1/crds_test.go, internal/dashboards) fail while
# the committed files differ from what this script writes.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

echo "generate: deepcopy" >&2
go tool controller-gen object paths=./operator/api/...

echo "generate: CRDs into crds/" >&2
rm -f crds/k8s.tuna.am_*.yaml
go tool controller-gen crd:crdVersions=v1 paths=./operator/api/... output:crd:artifacts:config=crds

echo "generate: copy CRDs into chart/tuna-k8s-operator/crds/" >&2
mkdir -p chart/tuna-k8s-operator/crds
rm -f chart/tuna-k8s-operator/crds/k8s.tuna.am_*.yaml
cp crds/k8s.tuna.am_*.yaml chart/tuna-k8s-operator/crds/

echo "generate: Grafana dashboards into chart/tuna-k8s-operator/dashboards/ and edge/deploy/monitoring/" >&2
go run ./internal/dashboards/gen
