package controller

import (
	"log/slog"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/capo-net/capo/pkg/caliconode"
	"github.com/capo-net/capo/pkg/kubeclient"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/selection"
)

// podChanged covers the teardowns an uncovered node's pod goes through:
// being deleted, terminating (an eviction leaves it Failed or Succeeded),
// or a new sandbox with new addresses (the old ones were the old sandbox's).
func (c *coverer) podChanged(old, p *corev1.Pod) {
	if c.isCalicoNode(p) {
		c.calicoNodeChanged(p, false)
		return
	}
	if c.isAgent(p) {
		if podReady(old) != podReady(p) || p.DeletionTimestamp != nil {
			c.due() // the next pass sees whether its node became uncovered
		}
		return
	}
	// Seen as it happens: the teardown is now, whatever the pod's
	// readiness said before.
	if terminated(p) && !terminated(old) {
		c.podGoing(p, podIPs(p), c.now())
	}
	if dropped := droppedIPs(old, p); len(dropped) > 0 {
		c.podGoing(p, dropped, c.now())
	}
	if !terminated(p) && len(caliconode.RunningIPs(p)) > 0 {
		c.holdAway(p.Spec.NodeName) // a pod started in the window is held too
	}
}

func (c *coverer) podGone(p *corev1.Pod) {
	if c.isCalicoNode(p) {
		c.calicoNodeChanged(p, true)
		return
	}
	if c.isAgent(p) {
		c.due()
		return
	}
	c.podGoing(p, podIPs(p), time.Time{})
}

func (c *coverer) isAgent(p *corev1.Pod) bool {
	return p.Namespace == c.opts.Namespace && c.agents.Matches(labels.Set(p.Labels))
}

// nodeDeleted: Calico's IPAM garbage collector frees a deleted node's
// addresses at once, so its selected pods are reserved now, in one write.
func (c *coverer) nodeDeleted(obj any) {
	n, ok := kubeclient.Deleted[corev1.Node](obj)
	if !ok {
		return
	}
	c.mu.Lock()
	c.deletedNodes[n.Name] = deletedNode{node: n, at: c.now()}
	c.mu.Unlock()
	c.scanNode(n.Name, false)
	c.coverRecent(n.Name, reserve.ReasonNodeLost)
}

// scanNode takes up every pod of an uncovered node that is going or gone:
// on a deleted node all of them, else the terminated ones.
func (c *coverer) scanNode(node string, onlyTerminated bool) {
	objs, _ := c.caches.pods.GetIndexer().ByIndex(byNode, node)
	for _, p := range kubeclient.Listed[corev1.Pod](objs) {
		if !c.isAgent(p) && (!onlyTerminated || terminated(p)) {
			c.podGoing(p, podIPs(p), time.Time{})
		}
	}
}

// podGoing reserves ips of a selected pod whose node will not: see
// coverage.go. A teardown left to the node's agent is remembered for a
// while, in case that agent hangs while it still looks ready (recent.go).
// at is when the teardown happened; zero: as the pod's status tells.
func (c *coverer) podGoing(p *corev1.Pod, ips []netip.Addr, at time.Time) {
	lp, ok := c.selectedTeardown(p, ips, at)
	if !ok {
		return
	}
	reason := c.uncovered(lp.node)
	if reason == "" {
		c.recent.add(lp, c.recentWindow())
		c.metrics.recentRemembered.Set(float64(c.recent.len()))
		return
	}
	c.cover(lp.as(reason))
}

// cover hands a lost pod to the queue. A replica that does not lead
// remembers it instead: if the leader has just died, nobody else saw it,
// and this replica may lead next.
func (c *coverer) cover(lp lostPod) {
	if !c.leading.Load() {
		c.remember(lp)
		return
	}
	c.lost.add(lp)
}

// lostPod is a selected pod going from an uncovered node, and what to
// reserve for it.
type lostPod struct {
	seen    time.Time
	pod     string // namespace/name
	node    string
	rule    string
	entries []reserve.Entry
}

// as is lp with its entries reserved for reason.
func (lp lostPod) as(reason string) lostPod {
	lp.entries = slices.Clone(lp.entries)
	for i := range lp.entries {
		lp.entries[i].Reason = reason
	}
	return lp
}

// selectedTeardown is the teardown of ips if the pod is selected, its
// entries without a reason yet.
func (c *coverer) selectedTeardown(p *corev1.Pod, ips []netip.Addr, at time.Time) (lostPod, bool) {
	if p.Spec.NodeName == "" || len(ips) == 0 {
		return lostPod{}, false
	}
	node, _ := c.nodeState(p.Spec.NodeName)
	d := selection.Decide(selection.Of(node), selection.Of(c.caches.namespace(p.Namespace)), selection.Of(p), c.config.Get().Selectors)
	if d.Verdict != selection.Selected {
		return lostPod{}, false
	}
	now := c.now()
	if at.IsZero() {
		at = tornDownAt(p, now)
	}
	return lostPod{seen: now, pod: p.Namespace + "/" + p.Name, node: p.Spec.NodeName, rule: d.Rule, entries: podEntries(p, ips, "", at)}, true
}

// podIPs are the pod's addresses as its status gives them.
func podIPs(p *corev1.Pod) []netip.Addr {
	seen := map[netip.Addr]bool{}
	var out []netip.Addr
	add := func(s string) {
		if ip, err := netip.ParseAddr(s); err == nil && !seen[ip.Unmap()] {
			seen[ip.Unmap()] = true
			out = append(out, ip.Unmap())
		}
	}
	for _, ip := range p.Status.PodIPs {
		add(ip.IP)
	}
	add(p.Status.PodIP)
	return out
}

// droppedIPs are addresses old had and p no longer has: a new sandbox.
func droppedIPs(old, p *corev1.Pod) []netip.Addr {
	now := map[netip.Addr]bool{}
	for _, ip := range podIPs(p) {
		now[ip] = true
	}
	var out []netip.Addr
	for _, ip := range podIPs(old) {
		if !now[ip] && len(now) > 0 {
			out = append(out, ip)
		}
	}
	return out
}

// podEntries are p's entries for ips, dated at.
func podEntries(p *corev1.Pod, ips []netip.Addr, reason string, at time.Time) []reserve.Entry {
	out := make([]reserve.Entry, 0, len(ips))
	for _, ip := range ips {
		e := reserve.Entry{IP: ip.String(), Node: p.Spec.NodeName, Namespace: p.Namespace, Pod: p.Name, Reason: reason, ReservedAt: at.UTC(), Sandbox: caliconode.Sandbox(p, ip)}
		e.SetPod(p)
		out = append(out, e)
	}
	return out
}

// tornDownAt is when p's sandbox went, as its status tells, else now: an
// entry is dated from its teardown, so that one written late (the agent
// went away days after an eviction, and the controller takes the evicted
// pod up from its node's pods) is as old as it is. A pod that ended
// (Failed, Succeeded) went when it stopped being ready (the kubelet turns
// it so as its containers end); one deleted while running, when its
// deletion was asked. A teardown seen as it happens is dated now instead
// (podChanged): a pod may have been unready long before it ended.
func tornDownAt(p *corev1.Pod, now time.Time) time.Time {
	var at time.Time
	switch {
	case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status != corev1.ConditionTrue {
				at = cond.LastTransitionTime.Time
			}
		}
	case p.DeletionTimestamp != nil:
		at = p.DeletionTimestamp.Time
		if g := p.DeletionGracePeriodSeconds; g != nil {
			at = at.Add(-time.Duration(*g) * time.Second)
		}
	}
	if at.IsZero() || at.After(now) {
		return now
	}
	return at
}

// coverLostNodes, on taking the lease, reserves for pods that went from
// uncovered nodes while no replica was leading: those this replica saw go
// since the last leader last renewed, and those still going. Reserving is
// idempotent, so what the old leader did already is unchanged.
func (c *coverer) coverLostNodes() {
	missed := c.takeMissed()
	if len(missed) > 0 {
		slog.Info("reserving for uncovered nodes' pods that went while no replica led", "pods", len(missed))
	}
	for _, lp := range missed {
		c.lost.add(lp)
	}
	for _, p := range kubeclient.Listed[corev1.Pod](c.caches.pods.GetStore().List()) {
		if _, gone := c.nodeState(p.Spec.NodeName); !c.isAgent(p) && (terminated(p) || gone) {
			c.podGoing(p, podIPs(p), time.Time{})
		}
	}
}

// watchAway notices, each pass, the opted-in nodes whose agent stopped
// being ready, and takes up their pods that terminated before.
func (c *coverer) watchAway() {
	away := map[string]bool{}
	for _, n := range kubeclient.Listed[corev1.Node](c.caches.nodes.GetStore().List()) {
		if selection.NodeOptedIn(selection.Of(n)) && c.uncovered(n.Name) == ReasonAgentAway {
			away[n.Name] = true
			if !c.away[n.Name] {
				slog.Warn("capo-agent is not ready on an opted-in node: the controller reserves its pods' teardowns until it is", "node", n.Name)
				c.scanNode(n.Name, true)
			}
		}
	}
	c.away = away
	c.metrics.agentsAway.Set(float64(len(away)))
}
