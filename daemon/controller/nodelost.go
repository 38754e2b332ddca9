package controller

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

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
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				c.podGoing(p)
			}
		},
	})
}

// nodeDeleted: Calico's IPAM garbage collector frees a deleted node's
// addresses at once, so its selected pods are reserved now.
func (c *Controller) nodeDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	n, ok := obj.(*corev1.Node)
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
// never get a CNI DEL there, and Calico will free its addresses by GC.
func (c *Controller) podGoing(p *corev1.Pod) {
	if !c.leading.Load() || p.Spec.NodeName == "" || len(p.Status.PodIPs) == 0 && p.Status.PodIP == "" {
		return
	}
	node, gone := c.nodeState(p.Spec.NodeName)
	if !gone && !nodeLost(node) {
		return // a live kubelet will tear it down and the agent will reserve
	}
	d := selection.Decide(selection.Of(node), selection.Of(c.caches.namespace(p.Namespace)), selection.Of(p), c.config.Get().Selectors)
	if d.Outcome != selection.Selected {
		return
	}
	entries := nodeLostEntries(p, c.now())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.store.Reserve(ctx, p.Spec.NodeName, entries)
	if err != nil {
		slog.Error("could not reserve a lost node's pod; Calico's GC may free its addresses", "pod", p.Namespace+"/"+p.Name, "node", p.Spec.NodeName, "err", err)
		return
	}
	c.metrics.nodeLost.Add(float64(len(res.Added)))
	slog.Info("reserved for a pod on a lost node", "pod", p.Namespace+"/"+p.Name, "node", p.Spec.NodeName, "added", res.Added, "alreadyHeld", res.AlreadyHeld, "rule", d.Rule)
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

// coverLostNodes reserves, on taking the lease, for pods already being
// deleted from lost nodes while no replica was leading.
func (c *Controller) coverLostNodes(ctx context.Context) {
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
