//go:build tools

// Package tools pins the servers the end-to-end test beds run: a real etcd
// and a real kube-apiserver, and for the real-node bed the rest of a
// Kubernetes node (controller-manager, scheduler, kubelet, kube-proxy,
// kubectl), all built from the Go module proxy at one Kubernetes release.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
