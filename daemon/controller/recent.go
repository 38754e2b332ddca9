package controller

import (
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/pkg/kubeclient"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/selection"
)

// An agent that hangs (stopped, deadlocked) still looks Ready until the
// kubelet's readiness probe has failed a few times. The selected pods
// deleted meanwhile have their DELs journaled by capo-ipam, and are gone
// from the controller's cache by the time the node turns uncovered. So the
// controller remembers the teardowns it left to a node's agent for a
// while, and covers them when the node turns uncovered, as it covers the
// teardowns that come after.

// DefaultRecentWindow is how long a teardown left to a node's agent is
// remembered: the chart's readiness probe (every 5 s, 3 failures), the
// kubelet's status update and the controller's pass, or a node's
// NotReady (the node monitor's grace of 40-50 s), with room to spare.
const DefaultRecentWindow = 2 * time.Minute

// maxRecent bounds the memory of recent teardowns, across nodes.
const maxRecent = 10000

// recentTeardowns are the selected pods' teardowns left to their nodes'
// agents, oldest first.
type recentTeardowns struct {
	mu   sync.Mutex
	list []lostPod
}

// add remembers lp and forgets what is older than window before it.
func (r *recentTeardowns) add(lp lostPod, window time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cutoff := lp.seen.Add(-window)
	i := 0
	for i < len(r.list) && !r.list[i].seen.After(cutoff) {
		i++
	}
	r.list = r.list[i:]
	if len(r.list) >= maxRecent {
		r.list = r.list[len(r.list)-maxRecent+1:]
	}
	r.list = append(r.list, lp)
}

// take returns and forgets node's teardowns seen after since, one per pod:
// a pod seen terminating and then deleted is one teardown.
func (r *recentTeardowns) take(node string, since time.Time) []lostPod {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []lostPod
	at := map[string]int{}
	r.list = slices.DeleteFunc(r.list, func(lp lostPod) bool {
		if lp.node != node {
			return false
		}
		if !lp.seen.After(since) {
			return true
		}
		if i, ok := at[lp.pod]; ok {
			out[i].entries = mergeEntries(out[i].entries, lp.entries)
		} else {
			at[lp.pod] = len(out)
			out = append(out, lp)
		}
		return true
	})
	return out
}

// mergeEntries adds to es the entries of more at other addresses.
func mergeEntries(es, more []reserve.Entry) []reserve.Entry {
	for _, e := range more {
		if !slices.ContainsFunc(es, func(x reserve.Entry) bool { return x.IP == e.IP }) {
			es = append(slices.Clip(es), e)
		}
	}
	return es
}

func (r *recentTeardowns) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.list)
}

func (c *coverer) recentWindow() time.Duration {
	if c.opts.RecentWindow > 0 {
		return c.opts.RecentWindow
	}
	return DefaultRecentWindow
}

// coverRecent covers the teardowns node's agent was left within the
// window, now that the node is uncovered for reason, as the teardowns to
// come: what Calico still allocates to the pod, or has freed while no
// reservation holds it (stillTheirs); an agent that answered holds its own.
func (c *coverer) coverRecent(node, reason string) {
	recent := c.recent.take(node, c.now().Add(-c.recentWindow()))
	c.metrics.recentRemembered.Set(float64(c.recent.len()))
	for _, lp := range recent {
		lp = c.withoutSuccessors(lp.as(reason))
		if len(lp.entries) == 0 {
			continue
		}
		c.metrics.recentCovered.WithLabelValues(reason).Inc()
		slog.Info("covering a teardown left to the node's agent before the node turned uncovered", "pod", lp.pod, "node", node, "reason", reason, "ago", c.now().Sub(lp.seen).Round(time.Second).String())
		c.cover(lp)
	}
}

// withoutSuccessors drops the addresses a new pod of the same name now has
// (a StatefulSet member that got its address back): Calico's attributes
// name the pod, not its incarnation.
func (c *coverer) withoutSuccessors(lp lostPod) lostPod {
	e0 := lp.entries[0]
	p := c.caches.pod(e0.Namespace, e0.Pod)
	if p == nil || string(p.UID) == e0.PodUID {
		return lp
	}
	now := map[string]bool{}
	for _, ip := range podIPs(p) {
		now[ip.String()] = true
	}
	lp.entries = slices.DeleteFunc(lp.entries, func(e reserve.Entry) bool { return now[e.IP] })
	return lp
}

// watchCoverage notices, each pass, the opted-in nodes that turned
// uncovered since the last, and covers their recent teardowns.
func (c *coverer) watchCoverage() {
	uncovered := map[string]bool{}
	for _, n := range kubeclient.Listed[corev1.Node](c.caches.nodes.GetStore().List()) {
		if !selection.NodeOptedIn(selection.Of(n)) {
			continue
		}
		if reason := c.uncovered(n.Name); reason != "" {
			uncovered[n.Name] = true
			if !c.uncoveredNodes[n.Name] {
				c.coverRecent(n.Name, reason)
			}
		}
	}
	c.uncoveredNodes = uncovered
}
