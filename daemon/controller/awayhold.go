package controller

import (
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/capo-net/capo/pkg/calico"
	"github.com/capo-net/capo/pkg/caliconode"
	"github.com/capo-net/capo/pkg/kubeclient"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/selection"
)

// While calico-node is replaced on a node, its install-cni writes Calico's
// conflist without capo-ipam, and the node's agent holds the node's
// selected pods' addresses until it has put capo back (package
// caliconode). An agent that is away then (restarting, crash-looping on an
// API server out of reach) holds nothing, and a pod torn down in the
// window frees its address through plain calico-ipam; the controller's
// coverage of the agent's absence reserves it only once it sees the pod
// go, by which time another pod may have the address. So the controller
// holds in the agent's place: while a node's agent is away and its
// calico-node is being replaced, it reserves the node's selected running
// pods' addresses as the agent would (reserve.ReasonCNIRewrite). The agent,
// back, lets go of the holds still in use once capo is in the chain again,
// as it does of its own, and keeps those whose pod was torn down meanwhile.

// awayHolds is the controller's side: a replacement window per node, and
// the addresses already queued to hold in the window now open.
type awayHolds struct {
	selector labels.Selector

	mu      sync.Mutex
	windows map[string]*caliconode.Window
	queued  map[string]map[string]bool // node -> address -> queued to hold
}

func newAwayHolds(selector labels.Selector) *awayHolds {
	return &awayHolds{selector: selector, windows: map[string]*caliconode.Window{}, queued: map[string]map[string]bool{}}
}

func (c *coverer) isCalicoNode(p *corev1.Pod) bool {
	return p != nil && !c.holds.selector.Empty() && c.holds.selector.Matches(labels.Set(p.Labels))
}

// window is the node's replacement window, made on first use.
func (c *coverer) window(node string) *caliconode.Window {
	h := c.holds
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.windows[node]
	if w == nil {
		w = &caliconode.Window{Selector: h.selector, Pods: func() []*corev1.Pod { return c.nodePods(node) }, Now: c.now}
		h.windows[node] = w
	}
	return w
}

func (c *coverer) nodePods(node string) []*corev1.Pod {
	objs, _ := c.caches.pods.GetIndexer().ByIndex(byNode, node)
	return kubeclient.Listed[corev1.Pod](objs)
}

// calicoNodeChanged looks at the node's window again when one of its
// calico-node pods changes or goes.
func (c *coverer) calicoNodeChanged(p *corev1.Pod, gone bool) {
	if p.Spec.NodeName == "" {
		return
	}
	if gone {
		c.window(p.Spec.NodeName).Deleted()
	}
	c.holdAway(p.Spec.NodeName)
}

// holdAway holds the node's selected running pods' addresses if its agent
// is away and calico-node is being replaced there; once either ends, what
// was queued is forgotten, so that a later window holds again.
func (c *coverer) holdAway(node string) {
	if !c.leading.Load() {
		return
	}
	// The agent's readiness first: it is an index lookup, and this runs
	// on every pod change; the window reads the node's pods.
	n, gone := c.nodeState(node)
	if gone || c.uncovered(node) != ReasonAgentAway {
		c.holds.forget(node)
		return
	}
	open, why := c.window(node).Open()
	if !open {
		c.holds.forget(node)
		return
	}
	sel := caliconode.Selection{
		Node:      selection.Of(n),
		Namespace: func(name string) *selection.Object { return selection.Of(c.caches.namespace(name)) },
		Selectors: c.config.Get().Selectors,
	}
	running, _ := caliconode.HoldEntries(sel, c.nodePods(node), func(p *corev1.Pod, ip string) string {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			return ""
		}
		return caliconode.Sandbox(p, a)
	}, c.now())
	byPod := map[string][]reserve.Entry{}
	for _, e := range c.holds.unqueued(node, running) {
		byPod[e.Namespace+"/"+e.Pod] = append(byPod[e.Namespace+"/"+e.Pod], e)
	}
	for pod, entries := range byPod {
		c.lost.add(lostPod{seen: c.now(), pod: pod, node: node, rule: "capo-agent away while calico-node is replaced (" + why + "): held in its place", entries: entries})
	}
}

// unqueued are the entries not queued yet in the node's window; they are
// marked queued.
func (h *awayHolds) unqueued(node string, entries []reserve.Entry) []reserve.Entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.queued[node]
	if q == nil {
		q = map[string]bool{}
		h.queued[node] = q
	}
	var out []reserve.Entry
	for _, e := range entries {
		key := e.IP + "|" + e.PodUID
		if !q[key] {
			q[key] = true
			out = append(out, e)
		}
	}
	return out
}

func (h *awayHolds) forget(node string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.queued, node)
}

// holdable settles a hold against Calico's allocation h of its address:
// held only while the pod's sandbox has it, and then naming that sandbox
// (where Calico's annotations did not say, on the etcdv3 datastore).
func holdable(e reserve.Entry, h *calico.Holder) (reserve.Entry, bool) {
	if h == nil || h.Cooling || !h.Is(e.Namespace, e.Pod) {
		return e, false
	}
	sb := handleSandbox(h.Handle)
	if e.Sandbox == "" {
		e.Sandbox = sb
	}
	return e, e.Sandbox == sb
}
