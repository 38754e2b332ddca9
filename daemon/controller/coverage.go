package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/capo-net/capo/pkg/kubeclient"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/returns"
)

// Who reserves a node's teardowns. Normally the node's capo-agent, through
// capo-ipam. The controller steps in where nobody on the node will:
//   - a lost node (gone, NotReady, unreachable) never runs its DELs, and
//     Calico's GC frees its pods' addresses (at once when the Node object is
//     deleted, else after its leak grace);
//   - a node whose agent is not ready: capo-ipam journals each DEL and keeps
//     the address allocated, but Calico's GC frees an allocation whose pod
//     is Failed, gone, or has another address after its leak grace
//     (15 min by default), however long the agent stays away.

// ReasonAgentAway marks addresses the controller reserved for a node whose
// agent was not ready.
const ReasonAgentAway = "agent-away"

// DefaultAgentSelector picks the chart's capo-agent pods.
const DefaultAgentSelector = "app.kubernetes.io/name=capo,app.kubernetes.io/component=agent"

// uncovered says why the controller must reserve for a node's teardowns
// ("" when its agent does): reserve.ReasonNodeLost or ReasonAgentAway.
func (c *coverer) uncovered(nodeName string) string {
	node, gone := c.nodeState(nodeName)
	if gone || returns.NodeDown(node) {
		return reserve.ReasonNodeLost
	}
	if !c.agentReady(nodeName) {
		return ReasonAgentAway
	}
	return ""
}

// agentReady: a capo-agent pod on the node reports Ready, as the kubelet
// sees its /readyz.
func (c *coverer) agentReady(node string) bool {
	objs, err := c.caches.pods.GetIndexer().ByIndex(byNode, node)
	if err != nil {
		return false
	}
	for _, p := range kubeclient.Listed[corev1.Pod](objs) {
		if p.Namespace == c.opts.Namespace && c.agents.Matches(labels.Set(p.Labels)) && p.DeletionTimestamp == nil && podReady(p) {
			return true
		}
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// terminated: the pod's sandbox is being or has been torn down for good.
func terminated(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
}

// byNode indexes the pods cache by node name.
const byNode = "node"

func indexByNode(obj any) ([]string, error) {
	if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
		return []string{p.Spec.NodeName}, nil
	}
	return nil, nil
}
