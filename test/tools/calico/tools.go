//go:build tools

// Package calico pins the Calico programs the test bed runs besides the CNI
// plugin, at the release capo builds against: kube-controllers, whose IPAM
// garbage collector frees leaked addresses, and felix, the dataplane the
// real-node bed runs so that pods' traffic is routed as in a cluster.
package calico

import (
	_ "github.com/projectcalico/calico/felix/cmd/calico-felix"
	_ "github.com/projectcalico/calico/kube-controllers/cmd/kube-controllers"
)
