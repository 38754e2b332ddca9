//go:build tools

// Package tools pins the servers the end-to-end test bed runs: a real etcd
// and a real kube-apiserver, built from the Go module proxy.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
