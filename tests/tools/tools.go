//go:build tools

// Package tools pins the kube-apiserver and kubectl the test harness
// builds; etcd is pinned by cmd/etcd.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
