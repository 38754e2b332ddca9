package controller

import (
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// takeover is what a replica keeps for the day it leads: the pods that
// went from uncovered nodes while it did not lead, and deleted Nodes' last
// states, for their pods' late deletes.
type takeover struct {
	*deps

	mu           sync.Mutex
	deletedNodes map[string]deletedNode // for their pods' late deletes
	missed       []lostPod              // seen going from uncovered nodes while not leading
}

// deletedNode is a Node's last state, kept for its pods' late deletes.
type deletedNode struct {
	node *corev1.Node
	at   time.Time
}

// nodeState is the node as last seen, and whether it is deleted.
func (c *takeover) nodeState(name string) (*corev1.Node, bool) {
	if n := c.caches.node(name); n != nil {
		return n, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deletedNodes[name].node, true
}

// pruneDeletedNodes forgets deleted nodes once no cached pod is left on
// them and the look-back window has passed.
func (c *takeover) pruneDeletedNodes() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, d := range c.deletedNodes {
		if c.now().Sub(d.at) < c.missedWindow() {
			continue
		}
		if objs, _ := c.caches.pods.GetIndexer().ByIndex(byNode, name); len(objs) == 0 {
			delete(c.deletedNodes, name)
		}
	}
}

// missedWindow is how far back a new leader looks. client-go's worst case
// for a takeover after the leader dies just after renewing: a follower
// notices the renewal up to one jittered retry (x2.2) late, waits out the
// lease, and tries again only at its next jittered retry; a leader that is
// cut off rather than dead keeps acting until its renew deadline.
func (c *takeover) missedWindow() time.Duration {
	return c.opts.LeaseDuration + c.opts.RenewDeadline + 5*c.opts.RetryPeriod
}

// maxRemembered bounds a follower's memory of lost pods.
const maxRemembered = 10000

func (c *takeover) remember(lp lostPod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Entries arrive in time order: the expired ones are at the front.
	cutoff := lp.seen.Add(-c.missedWindow())
	i := 0
	for i < len(c.missed) && !c.missed[i].seen.After(cutoff) {
		i++
	}
	// What is seen last of a pod is what is known best: a node whose agent
	// went away (agent-away) and then the node itself (node-lost).
	keep := slices.DeleteFunc(c.missed[i:], func(m lostPod) bool { return m.pod == lp.pod })
	if len(keep) >= maxRemembered {
		keep = keep[len(keep)-maxRemembered+1:]
	}
	c.missed = append(keep, lp)
	c.metrics.remembered.Set(float64(len(c.missed)))
	slog.Debug("an uncovered node's pod went while this replica did not lead; remembered for a takeover", "pod", lp.pod, "node", lp.node)
}

// takeMissed returns what went from uncovered nodes since the last
// leader's renewal, and forgets the rest.
func (c *takeover) takeMissed() []lostPod {
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
