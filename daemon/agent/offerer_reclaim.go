package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	libapiv3 "github.com/projectcalico/calico/libcalico-go/lib/apis/v3"
	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/calico"
	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/returns"
	"github.com/capo-net/capo/pkg/wire"
)

// nodeGetter reads one Node (the typed client's NodeInterface has it).
type nodeGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
}

// calicoNodeGetter reads one Calico node (clientv3's NodeInterface has it).
type calicoNodeGetter interface {
	Get(ctx context.Context, name string, opts options.GetOptions) (*libapiv3.Node, error)
}

// calicoNodes reads Calico nodes through the client, when asked.
type calicoNodes struct{ calico clientv3.Interface }

func (c calicoNodes) Get(ctx context.Context, name string, opts options.GetOptions) (*libapiv3.Node, error) {
	return c.calico.Nodes().Get(ctx, name, opts)
}

// predecessor is the allocation of e's address capo-ipam is to free before
// requesting it for pod (returns.Reclaim), or nil. The holder's Node is
// read only once everything else allows it: first the rule is asked as if
// that node were lost. An allocation on this very node is never freed,
// however its Calico node is named or its Node marked: this agent runs
// here, so the node is not lost, and its sandboxes' DELs come from its own
// runtime (a sandbox with no ADD record here, started before the node was
// opted in, would pass capo-ipam's own check).
func (o *offerer) predecessor(ctx context.Context, mode config.ReturnMode, pod *corev1.Pod, e reserve.Entry, h *calico.Holder, network string) *returns.Predecessor {
	if o.nodes == nil || h == nil {
		return nil
	}
	if p, _ := returns.Reclaim(mode, pod, e, o.node, network, h, returns.NodeGone); p == nil {
		return nil
	}
	name, node, err := o.kubeNode(ctx, h.Node)
	if err != nil {
		slog.Info("not freeing a returning member's address from its predecessor: its node could not be read", "pod", pod.Namespace+"/"+pod.Name, "ip", e.IP, "node", h.Node, "err", err)
		return nil
	}
	if name == o.node {
		slog.Warn("not freeing a returning member's address from its predecessor: it is allocated on this node, where this agent runs (not lost)", "pod", pod.Namespace+"/"+pod.Name, "ip", e.IP, "calicoNode", h.Node, "handle", h.Handle)
		return nil
	}
	p, why := returns.Reclaim(mode, pod, e, o.node, network, h, returns.NodeDeclaredDead(node))
	if p == nil {
		slog.Info("not freeing a returning member's address from its predecessor", "pod", pod.Namespace+"/"+pod.Name, "ip", e.IP, "why", why)
	}
	return p
}

// kubeNode reads the Kubernetes Node of the Calico node an allocation
// names: its name, and the Node (nil when it is gone). On the etcdv3
// datastore a Calico node may be named otherwise than its Node (its
// orchRefs name the Node): read by the Calico name, every such node would
// look gone. A Calico node that does not exist (deleted by hand, not
// registered again yet) says nothing of its machine: the Kubernetes Node of
// its name does, as on the Kubernetes datastore, where Calico's node is the
// Node. One that names no Kubernetes Node is not Kubernetes' to declare
// lost.
func (o *offerer) kubeNode(ctx context.Context, calicoName string) (string, *corev1.Node, error) {
	name := calicoName
	if o.calicoNodes != nil {
		cn, err := o.calicoNodes.Get(ctx, calicoName, options.GetOptions{})
		switch {
		case errors.As(err, new(cerrors.ErrorResourceDoesNotExist)):
		case err != nil:
			return "", nil, fmt.Errorf("reading Calico node %s: %w", calicoName, err)
		default:
			if name = kubeNodeName(cn); name == "" {
				return "", nil, fmt.Errorf("calico node %s names no Kubernetes Node in its orchRefs: not a node Kubernetes declares lost", calicoName)
			}
		}
	}
	node, err := o.nodes.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return name, nil, nil
	}
	return name, node, err
}

// kubeNodeName is the Kubernetes Node a Calico node names, "" for none.
func kubeNodeName(n *libapiv3.Node) string {
	for _, ref := range n.Spec.OrchRefs {
		if ref.Orchestrator == apiv3.OrchestratorKubernetes && ref.NodeName != "" {
			return ref.NodeName
		}
	}
	return ""
}

// appendPredecessor adds p unless its sandbox is there already (one
// sandbox holds both families of a dual-stack pod).
func appendPredecessor(ps []returns.Predecessor, p returns.Predecessor) []returns.Predecessor {
	if slices.ContainsFunc(ps, func(q returns.Predecessor) bool { return q.ContainerID == p.ContainerID }) {
		return ps
	}
	return append(ps, p)
}

func wireReclaim(ps []returns.Predecessor) []wire.Reclaim {
	var out []wire.Reclaim
	for _, p := range ps {
		out = append(out, wire.Reclaim{ContainerID: p.ContainerID, Node: p.Node})
	}
	return out
}
