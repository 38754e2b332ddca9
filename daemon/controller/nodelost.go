package controller

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/capo-net/capo/pkg/kubeclient"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/selection"
)

func metaName(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

// watchTriggers wires the events that make a release due at once, and the
// ones that mean a lost node's pod must be reserved now.
func (c *Controller) watchTriggers() {
	due := func(any) { c.due() }
	dueUpdate := func(any, any) { c.due() }
	for _, inf := range []cache.SharedIndexInformer{c.caches.namespaces, c.caches.sets, c.caches.replicas, c.caches.deploys} {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: due, UpdateFunc: dueUpdate})
	}
	_, _ = c.caches.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if n, ok := obj.(*corev1.Node); ok && n.Annotations[ReleaseAnnotation] != "" {
				c.due()
			}
		},
		DeleteFunc: func(obj any) { c.nodeDeleted(obj) },
	})
	_, _ = c.caches.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if p, ok := obj.(*corev1.Pod); ok && p.DeletionTimestamp != nil {
				c.podGoing(p)
			}
		},
		DeleteFunc: func(obj any) {
			if p, ok := kubeclient.Deleted[corev1.Pod](obj); ok {
				c.podGoing(p)
			}
		},
	})
}

// nodeDeleted: Calico's IPAM garbage collector frees a deleted node's
// addresses at once, so its selected pods are reserved now.
func (c *Controller) nodeDeleted(obj any) {
	n, ok := kubeclient.Deleted[corev1.Node](obj)
	if !ok {
		return
	}
	c.mu.Lock()
	c.deletedNodes[n.Name] = n
	c.mu.Unlock()
	for _, o := range c.caches.pods.GetStore().List() {
		if p := o.(*corev1.Pod); p.Spec.NodeName == n.Name {
			c.podGoing(p)
		}
	}
}

// podGoing reserves a pod's addresses if it is leaving a lost node: it will
// never get a CNI DEL there, and Calico will free its addresses by GC. A
// replica that does not lead remembers it instead: if the leader has just
// died, nobody else saw it, and this replica may be the next to lead.
func (c *Controller) podGoing(p *corev1.Pod) {
	lp, ok := c.lostPodOf(p)
	if !ok {
		return
	}
	if !c.leading.Load() {
		c.remember(lp)
		return
	}
	c.reserveLost(lp)
}

// lostPod is a selected pod leaving a lost node, and what to reserve for it.
type lostPod struct {
	seen    time.Time
	pod     string // namespace/name
	node    string
	rule    string
	entries []reserve.Entry
}

func (c *Controller) lostPodOf(p *corev1.Pod) (lostPod, bool) {
	if p.Spec.NodeName == "" || len(p.Status.PodIPs) == 0 && p.Status.PodIP == "" {
		return lostPod{}, false
	}
	node, gone := c.nodeState(p.Spec.NodeName)
	if !gone && !nodeLost(node) {
		return lostPod{}, false // a live kubelet will tear it down and the agent will reserve
	}
	d := selection.Decide(selection.Of(node), selection.Of(c.caches.namespace(p.Namespace)), selection.Of(p), c.config.Get().Selectors)
	if d.Verdict != selection.Selected {
		return lostPod{}, false
	}
	now := c.now()
	return lostPod{seen: now, pod: p.Namespace + "/" + p.Name, node: p.Spec.NodeName, rule: d.Rule, entries: nodeLostEntries(p, now)}, true
}

func (c *Controller) reserveLost(lp lostPod) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.store.Reserve(ctx, lp.node, lp.entries)
	if err != nil {
		slog.Error("could not reserve a lost node's pod; Calico's GC may free its addresses", "pod", lp.pod, "node", lp.node, "err", err)
		return
	}
	c.metrics.nodeLost.Add(float64(len(res.Added)))
	slog.Info("reserved for a pod on a lost node", "pod", lp.pod, "node", lp.node, "added", res.Added, "alreadyHeld", res.AlreadyHeld, "rule", lp.rule)
}

// maxRemembered bounds a follower's memory of lost pods.
const maxRemembered = 10000

// missedWindow is how far back a new leader looks: a dead leader renewed
// the lease no longer ago than its duration plus a few of the retries in
// which this replica noticed, so whatever went before, it saw.
func (c *Controller) missedWindow() time.Duration {
	return c.opts.LeaseDuration + 3*c.opts.RetryPeriod
}

func (c *Controller) remember(lp lostPod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Entries arrive in time order: the expired ones are at the front.
	cutoff := lp.seen.Add(-c.missedWindow())
	i := 0
	for i < len(c.missed) && !c.missed[i].seen.After(cutoff) {
		i++
	}
	keep := c.missed[i:]
	if len(keep) >= maxRemembered {
		keep = keep[len(keep)-maxRemembered+1:]
	}
	c.missed = append(keep, lp)
	c.metrics.remembered.Set(float64(len(c.missed)))
	slog.Debug("a lost node's pod went while this replica did not lead; remembered for a takeover", "pod", lp.pod, "node", lp.node)
}

// takeMissed returns what went from lost nodes since the last leader's
// renewal, and forgets the rest.
func (c *Controller) takeMissed() []lostPod {
	c.mu.Lock()
	defer c.mu.Unlock()
	cutoff := c.now().Add(-c.missedWindow())
	var out []lostPod
	for _, m := range c.missed {
		if m.seen.After(cutoff) {
			out = append(out, m)
		}
	}
	c.missed = nil
	c.metrics.remembered.Set(0)
	return out
}

// nodeState is the node as last seen, and whether it is deleted.
func (c *Controller) nodeState(name string) (*corev1.Node, bool) {
	if n := c.caches.node(name); n != nil {
		return n, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deletedNodes[name], true
}

// coverLostNodes reserves, on taking the lease, for pods that went from lost
// nodes while no replica was leading: those deleted since the last leader
// last renewed, as this replica saw them go, and those still being deleted.
// Reserving is idempotent, so what the old leader did already is unchanged.
func (c *Controller) coverLostNodes(ctx context.Context) {
	missed := c.takeMissed()
	if len(missed) > 0 {
		slog.Info("reserving for lost nodes' pods that went while no replica led", "pods", len(missed))
	}
	for _, lp := range missed {
		if ctx.Err() != nil {
			return
		}
		c.reserveLost(lp)
	}
	for _, o := range c.caches.pods.GetStore().List() {
		if ctx.Err() != nil {
			return
		}
		p := o.(*corev1.Pod)
		if _, gone := c.nodeState(p.Spec.NodeName); p.DeletionTimestamp != nil || gone {
			c.podGoing(p)
		}
	}
}

func nodeLostEntries(p *corev1.Pod, now time.Time) []reserve.Entry {
	ips := map[string]bool{}
	for _, ip := range p.Status.PodIPs {
		ips[ip.IP] = true
	}
	if p.Status.PodIP != "" {
		ips[p.Status.PodIP] = true
	}
	var out []reserve.Entry
	for ip := range ips {
		e := reserve.Entry{IP: ip, Node: p.Spec.NodeName, Namespace: p.Namespace, Pod: p.Name, Reason: reserve.ReasonNodeLost, ReservedAt: now.UTC()}
		e.SetPod(p)
		out = append(out, e)
	}
	return out
}
