package agent

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/pkg/caliconode"
	"github.com/capo-net/capo/pkg/selection"
)

// DefaultCalicoNodeSelector picks calico-node's pods (caliconode tells
// why the agent watches them).
const DefaultCalicoNodeSelector = caliconode.DefaultSelector

// nodeSelection is what decides, from the agent's caches, whether this
// node's pods are selected.
func nodeSelection(c Cluster, selectors []selection.Selector) caliconode.Selection {
	return caliconode.Selection{
		Node:      selection.Of(c.Node()),
		Namespace: func(name string) *selection.Object { return selection.Of(c.Namespace(name)) },
		Selectors: selectors,
	}
}

// annotatedSandbox is the sandbox Calico's annotations say holds ip, as
// entries keep it; "" when they do not say.
func annotatedSandbox(p *corev1.Pod, ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ""
	}
	return caliconode.Sandbox(p, a)
}
