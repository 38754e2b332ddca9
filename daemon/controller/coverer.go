package controller

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/pkg/kubeclient"
	"github.com/capo-net/capo/pkg/returns"
	"github.com/capo-net/capo/pkg/selection"
)

// coverer reserves the teardowns no agent will (coverage.go says whose):
// it follows the pods and nodes (nodelost.go), queues what it must
// reserve per node (lostqueue.go), remembers the teardowns left to an
// agent for a while in case it turns out hung (recent.go), and, while this
// replica does not lead, what went from uncovered nodes (missed), for a
// takeover.
type coverer struct {
	*deps
	due    func() // asks the controller for a release pass now
	lost   *lostQueue
	recent *recentTeardowns

	*takeover

	holds *awayHolds // calico-node replaced while a node's agent is away (awayhold.go)

	away           map[string]bool // opted-in nodes whose agent was not ready at the last pass (pass goroutine only)
	uncoveredNodes map[string]bool // opted-in nodes uncovered at the last pass (pass goroutine only)
}

func newCoverer(d *deps, due func()) *coverer {
	return &coverer{
		deps: d, due: due,
		lost:           newLostQueue(),
		recent:         &recentTeardowns{},
		takeover:       &takeover{deps: d, deletedNodes: map[string]deletedNode{}},
		holds:          newAwayHolds(d.calicoNodes),
		away:           map[string]bool{},
		uncoveredNodes: map[string]bool{},
	}
}

// everyPass is the coverer's part of each release pass: what it notices
// by looking at every node rather than by an event.
func (c *coverer) everyPass() {
	c.countDownNodes()
	c.watchAway()
	for node := range c.away {
		c.holdAway(node)
	}
	c.watchCoverage()
	c.pruneDeletedNodes()
}

// countDownNodes publishes how many opted-in nodes are down or gone.
func (c *coverer) countDownNodes() {
	n := 0
	for _, node := range kubeclient.Listed[corev1.Node](c.caches.nodes.GetStore().List()) {
		if selection.NodeOptedIn(selection.Of(node)) && returns.NodeDown(node) {
			n++
		}
	}
	c.metrics.lostNodes.Set(float64(n))
}
