// Package v1alpha1 holds the Kubernetes API of the Tuna operator, group
// k8s.tuna.am, version v1alpha1:
//
//   - Tunnel publishes a Service of its namespace through a Tuna HTTP or TCP
//     tunnel;
//   - Domain reserves a permanent subdomain of the edge's base domain, or a
//     custom domain, on the Tuna account;
//   - TCPEndpoint reserves a TCP port on the account under an alias.
//
// The CustomResourceDefinitions in crds/ and in the chart's crds/ are
// generated from these types, and so is zz_generated.deepcopy.go: after a
// change here run hack/generate.sh (a test fails while they differ).
//
// +kubebuilder:object:generate=true
// +groupName=k8s.tuna.am
package v1alpha1

// Regenerate deepcopy and the CRDs with `go generate ./operator/api/...`.
//go:generate bash ../../../hack/generate.sh
