//go:build tools

// Package tools pins the programs the end-to-end test beds run: a real etcd
// and a real kube-apiserver; for the real-node bed the rest of a Kubernetes
// node (controller-manager, scheduler, kubelet, kube-proxy, kubectl) and
// Calico's felix; Calico's kube-controllers for its IPAM garbage collector.
//
// The module requires capo itself (replaced by this checkout), so that every
// module the two share resolves to capo's own version: the servers then
// reuse the packages capo's build already compiled (client-go, the API
// types, grpc, Calico's libraries) instead of compiling a second set.
package tools

import (
	_ "github.com/projectcalico/calico/felix/cmd/calico-felix"
	_ "github.com/projectcalico/calico/kube-controllers/cmd/kube-controllers"
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"

	// Only for its requirements (see above).
	_ "github.com/capo-net/capo/pkg/version"
)
