package returns

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/pkg/calico"
	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/reserve"
)

// Lost is why Kubernetes counts a node as lost, in one bounded word (a
// metric label); "" when it does not.
type Lost string

const (
	NodeGone         Lost = "node-gone"           // its Node object is deleted (a cloud's node controller, an operator)
	NodeOutOfService Lost = "node-out-of-service" // tainted node.kubernetes.io/out-of-service: an operator says it is shut down
)

// Says is the reason in words, for an Event.
func (l Lost) Says() string {
	switch l {
	case NodeGone:
		return "its Node object is deleted"
	case NodeOutOfService:
		return "tainted " + corev1.TaintNodeOutOfService
	}
	return "not lost"
}

// NodeDeclaredDead says whether Kubernetes asserts that node's workloads are dead;
// nil is a Node object that is gone. Only two states say so: the Node
// deleted, or tainted out-of-service (non-graceful node shutdown: an
// operator says it is off). A node tainted unreachable is not: its kubelet
// stopped reporting, which a control-plane partition does too, and its
// pods may still run there with their addresses (a pod force-deleted there
// is not dead); Calico's own GC holds such an allocation for its leak
// grace. Nor is a node only NotReady (its kubelet still reports, say under
// pressure or with its runtime down): its kubelet runs the sandbox's DEL
// itself, and a DEL capo-ipam journaled there is replayed by that node's
// agent. (NodeDown is far wider: capo-controller covers the teardowns of
// any node that may not run them, and frees nothing.)
func NodeDeclaredDead(node *corev1.Node) Lost {
	if node == nil {
		return NodeGone
	}
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeOutOfService {
			return NodeOutOfService
		}
	}
	return ""
}

// NodeDown says whether node can no longer be counted on to tear its pods
// down: declared dead (NodeDeclaredDead), NotReady, its readiness
// unknown, or tainted unreachable. capo-controller reserves such a node's
// teardowns itself; only a dead one's allocations may be freed.
func NodeDown(node *corev1.Node) bool {
	if NodeDeclaredDead(node) != "" {
		return true
	}
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeUnreachable {
			return true
		}
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status != corev1.ConditionTrue
		}
	}
	return true
}

// Predecessor is an allocation capo-ipam frees before it requests a
// returning member's address: the member's own earlier sandbox, on a node
// Kubernetes has declared lost, which will never run its DEL.
type Predecessor struct {
	Handle      string
	ContainerID string // the sandbox calico-ipam's DEL is run for
	Node        string
	Lost        Lost
}

// containerID is what the CNI spec allows as a container ID.
var containerID = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`)

// Reclaim says whether h, Calico's allocation of e's address, may be freed
// for pod, which starts on node here under the netconf named network,
// before the address is requested: only under anyNode, only for the same
// member's predecessor (the same namespace and pod name, another pod UID:
// names are unique, so that pod object is gone), only on another node
// Kubernetes has declared lost (lost, see NodeDeclaredDead), and only for a handle
// capo-ipam can name to calico-ipam's DEL ("<network>.<container ID>").
// Otherwise nil and why not. Calico would free it itself after its leak
// grace period and give it to anyone; this gives it to the member alone,
// and the address stays reserved until the member is up with it.
func Reclaim(mode config.ReturnMode, pod *corev1.Pod, e reserve.Entry, here, network string, h *calico.Holder, lost Lost) (*Predecessor, string) {
	switch {
	case mode != config.ReturnAnyNode:
		return nil, fmt.Sprintf("returnAddress is %s, not %s", mode, config.ReturnAnyNode)
	case pod == nil || h == nil:
		return nil, "no pod, or the address is not allocated"
	case h.Namespace != pod.Namespace || h.Pod != pod.Name:
		return nil, fmt.Sprintf("%s is allocated to pod %s/%s, not to an earlier %s/%s", e.IP, h.Namespace, h.Pod, pod.Namespace, pod.Name)
	case h.Node == "" || h.Node == here:
		return nil, fmt.Sprintf("%s is allocated on node %q, not on another node", e.IP, h.Node)
	case e.PodUID == "" || e.PodUID == string(pod.UID):
		return nil, fmt.Sprintf("the reservation of %s names pod UID %q: the pod is not a successor of the one it was reserved for", e.IP, e.PodUID)
	case lost == "":
		return nil, fmt.Sprintf("node %s is not lost to Kubernetes (its Node exists, without the %s taint): its sandboxes may still run (unreachable is not dead), and its kubelet runs their DELs", h.Node, corev1.TaintNodeOutOfService)
	}
	id, ok := strings.CutPrefix(h.Handle, network+".")
	if network == "" || !ok || !containerID.MatchString(id) {
		return nil, fmt.Sprintf("Calico handle %q is not %q followed by a container ID: capo-ipam cannot name that sandbox to calico-ipam's DEL", h.Handle, network+".")
	}
	return &Predecessor{Handle: h.Handle, ContainerID: id, Node: h.Node, Lost: lost}, ""
}
