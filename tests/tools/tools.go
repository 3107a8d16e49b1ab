//go:build tools

// Package tools pins the kube-apiserver and kubectl the test harness
// builds, and the node components the node suite runs (kubelet, kube-proxy,
// kube-scheduler, kube-controller-manager); etcd is pinned by cmd/etcd.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
